/*
 * outlier.c - outlier detection from live traffic (pool key outlier): the
 * errors the workers meet at a server eject it for a while, and the tick
 * brings it back when that time is over.
 *
 * The workers tell main each error (LB_MAIN_LIVE_ERROR: the server, its
 * kind, when); the counting, the doubling and the cap are the balancer's
 * pure code (balancer/outlier.c). An ejection is one more input of the one
 * rotation decision (bal_member.is_ejected): the server is out as one
 * whose probe fails, its connections drain, and the minimum-pool guard may
 * hold it. A passing probe does not bring it back early: only its time
 * does, here, at the tick after it ends (within LB_TICK_MS).
 *
 * Main thread, under state_lock, like every decision (server.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon.h"
#include "state.h"
#include "state_int.h"

static struct bal_outlier_conf
lb_outlier_conf(const struct conf_pool *pc)
{
    return (struct bal_outlier_conf){
        .errors = pc->outlier.errors,
        .window_ms = pc->outlier.window_ms,
        .eject_ms = pc->outlier.eject_ms,
        .max_eject_percent = pc->outlier.max_eject_percent,
    };
}

int
lb_server_eject_reason(const struct lb_server *srv, char *buf, size_t len)
{
    struct bal_outlier_conf oc = lb_outlier_conf(srv->pool->conf);

    if (srv->b->outlier == NULL) {
        if (len > 0)
            buf[0] = '\0';
        return 0;
    }
    return bal_outlier_reason(srv->b->outlier, &oc, buf, len);
}

/* The pool's servers ejected now: the cap's count. */
static size_t
lb_outlier_ejected(const struct lb_pool *pool)
{
    size_t n = 0;

    for (size_t i = 0; i < pool->conf->nservers; i++)
        n += pool->servers[i].b->is_ejected;
    return n;
}

void
lb_server_live_error(struct lb_daemon *d, uint32_t id, enum bal_outlier_kind kind,
                     uint64_t at_ms, uint64_t began_ms)
{
    const struct lb_gen *g = d->gen;
    struct lb_server *srv = id < g->nby_id ? g->by_id[id] : NULL;
    struct lb_backend *b;
    struct bal_outlier_conf oc;
    char reason[128], qbuf[256];
    size_t ejected;
    uint64_t now = lb_mono_ms();

    /* a server a reload removed, or an agent's id: nothing to eject */
    if (srv == NULL || srv->b->id != id || kind >= BAL_OUTLIER_KINDS)
        return;
    b = srv->b;
    oc = lb_outlier_conf(srv->pool->conf);
    if (oc.errors == 0)
        return;                         /* off: nothing to record */
    if (b->outlier == NULL) {
        if ((b->outlier = malloc(sizeof(*b->outlier))) == NULL)
            return;
        bal_outlier_init(b->outlier);
    }
    if (bal_outlier_is_before_return(b->outlier, began_ms) ||
        !bal_outlier_record(b->outlier, &oc, kind, at_ms))
        return;
    bal_outlier_reason(b->outlier, &oc, reason, sizeof(reason));
    ejected = lb_outlier_ejected(srv->pool);
    if (!bal_outlier_may_eject(srv->pool->conf->nservers, ejected, oc.max_eject_percent)) {
        b->ejections_refused++;
        /* once per streak: the errors go on until the cap has room */
        if (bal_outlier_refused(b->outlier))
            lb_log(CONF_LOG_WARN, "outlier_eject_refused",
                   "pool=%s server=%s addr=%s reason=%s ejected=%zu/%zu max_eject=%u%%",
                   srv->pool->conf->name, srv->conf->name, srv->conf->addr.text,
                   lb_log_quote(qbuf, sizeof(qbuf), reason), ejected,
                   srv->pool->conf->nservers, oc.max_eject_percent);
        return;
    }
    b->eject_until_ms = bal_outlier_eject(b->outlier, &oc, now);
    b->is_ejected = true;
    b->ejected_at_ms = now;
    b->ejections[bal_outlier_reason_kind(b->outlier)]++;
    srv->pool->shared->has_ejected = true;
    lb_log(CONF_LOG_WARN, "outlier_eject",
           "pool=%s server=%s addr=%s reason=%s kind=%s eject_ms=%llu ejected=%zu/%zu",
           srv->pool->conf->name, srv->conf->name, srv->conf->addr.text,
           lb_log_quote(qbuf, sizeof(qbuf), reason),
           bal_outlier_kind_name(bal_outlier_reason_kind(b->outlier)),
           (unsigned long long)(b->eject_until_ms - now), ejected + 1,
           srv->pool->conf->nservers);
    lb_pool_decide(d, srv->pool, BAL_CAUSE_OUTLIER, srv, reason, 0);
}

/* One decision for all that came back in this tick (each one the cause):
 * a pool whose servers were ejected together gets them back together,
 * not in a decision of the whole pool per server. */
void
lb_outlier_tick(struct lb_daemon *d, struct lb_pool *pool, uint64_t now)
{
    bool is_off = pool->conf->outlier.errors == 0, any = false;
    const char *reason = is_off ? "outlier: turned off" : "outlier: eject time over";
    struct lb_server *first = NULL;

    if (!pool->shared->has_ejected)
        return;
    for (size_t i = 0; i < pool->conf->nservers; i++) {
        struct lb_server *srv = &pool->servers[i];
        struct lb_backend *b = srv->b;

        if (!b->is_ejected)
            continue;
        /* outlier off by a reload: back at once, its history forgotten */
        /* an ejected server has its window (lb_server_live_error) */
        if (!bal_outlier_expire(b->outlier, is_off ? UINT64_MAX : now)) {
            any = true;
            continue;
        }
        if (is_off)
            bal_outlier_init(b->outlier);
        b->is_ejected = false;
        b->is_outlier_news = true;
        if (first == NULL)
            first = srv;
        lb_log(CONF_LOG_INFO, "outlier_return", "pool=%s server=%s addr=%s ejected_ms=%llu "
               "reason=\"%s\"", pool->conf->name, srv->conf->name, srv->conf->addr.text,
               (unsigned long long)(now - b->ejected_at_ms), reason);
    }
    pool->shared->has_ejected = any;
    if (first != NULL)
        lb_pool_decide(d, pool, BAL_CAUSE_OUTLIER, first, reason, 0);
}
