/*
 * server.c - where health verdicts turn into rotation changes.
 *
 * Main thread only. The health module hands over raw probe results; here
 * each one is checked against the newest result applied (a slow probe never
 * overwrites a newer one), fed to the server's rise/fall state machine
 * (balancer/health.c), and a change of verdict goes through one named step:
 * lb_server_leave_rotation() or lb_server_join_rotation(). Those flip the
 * balancer's atomic in_rotation flag, which every worker reads on its next
 * pick: no lock, no message, no wait on the data path. Draining and the
 * minimum-pool guard (later issues) hook into these two steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lb.h"

static double
lb_server_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t
lb_server_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
lb_server_leave_rotation(struct lb_server *srv, const char *reason,
                         double detection_ms)
{
    struct lb_pool *pool = srv->pool;
    char qbuf[HC_DETAIL_MAX * 2];

    bal_server_set_in_rotation(pool->bal, srv->index, false);
    pool->in_rotation--;
    srv->last_change = lb_server_wall_now();
    lb_log(CONF_LOG_WARN, "server_down",
           "pool=%s server=%s addr=%s reason=%s failures=%u in_rotation=%zu/%zu detection_ms=%.0f",
           pool->conf->name, srv->conf->name, srv->conf->addr.text,
           lb_log_quote(qbuf, sizeof(qbuf), reason), srv->health.consecutive_failures,
           pool->in_rotation, pool->conf->nservers, detection_ms);
}

static void
lb_server_join_rotation(struct lb_server *srv, const char *reason,
                        double detection_ms)
{
    struct lb_pool *pool = srv->pool;
    char qbuf[HC_DETAIL_MAX * 2];

    bal_server_set_in_rotation(pool->bal, srv->index, true);
    pool->in_rotation++;
    srv->last_change = lb_server_wall_now();
    lb_log(CONF_LOG_INFO, "server_up",
           "pool=%s server=%s addr=%s reason=%s successes=%u in_rotation=%zu/%zu detection_ms=%.0f",
           pool->conf->name, srv->conf->name, srv->conf->addr.text,
           lb_log_quote(qbuf, sizeof(qbuf), reason), srv->health.consecutive_successes,
           pool->in_rotation, pool->conf->nservers, detection_ms);
}

static void
lb_server_apply_check(struct lb_daemon *d, struct lb_server *srv,
                      const struct hc_result *r)
{
    struct lb_health_stats *st = &d->health;
    enum bal_health_change change;
    char qbuf[HC_DETAIL_MAX * 2];
    double detection_ms;

    if (r->seq <= srv->last_seq)
        return;                     /* older than what is known: drop */
    srv->last_seq = r->seq;
    srv->last_check.is_set = true;
    srv->last_check.passed = r->passed;
    memcpy(srv->last_check.detail, r->detail, sizeof(srv->last_check.detail));
    srv->last_check.duration_ms = r->duration_ms;
    srv->last_check.at = r->started_at;
    srv->checks++;
    st->checks++;
    if (r->lag_ms > srv->lag_ms_max)
        srv->lag_ms_max = r->lag_ms;
    if (r->lag_ms > st->lag_ms_max)
        st->lag_ms_max = r->lag_ms;
    lb_log(CONF_LOG_DEBUG, "check",
           "pool=%s server=%s result=%s detail=%s duration_ms=%.1f lag_ms=%.1f",
           srv->pool->conf->name, srv->conf->name, r->passed ? "passed" : "failed",
           lb_log_quote(qbuf, sizeof(qbuf), r->detail), r->duration_ms, r->lag_ms);

    change = bal_health_apply(&srv->health, r->passed, r->started_mono_ms);
    if (change == BAL_HEALTH_UNCHANGED)
        return;
    /* Detection time: from the start of the first probe of the streak to
     * now, when the verdict takes effect. */
    detection_ms = (double)(lb_server_mono_ms() - srv->health.streak_started_ms);
    srv->last_detection_ms = detection_ms;
    st->detections++;
    if (detection_ms > st->detection_ms_max)
        st->detection_ms_max = detection_ms;
    if (change == BAL_HEALTH_WENT_DOWN)
        lb_server_leave_rotation(srv, r->detail, detection_ms);
    else
        lb_server_join_rotation(srv, r->detail, detection_ms);
}

static void
lb_health_on_results(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;
    struct lb_gen *g = d->gen;
    struct hc_result *results;
    size_t n = hc_take_results(d->hc, &results);

    for (size_t i = 0; i < n; i++) {
        if (results[i].id < g->nservers)
            lb_server_apply_check(d, g->servers_by_id[results[i].id], &results[i]);
    }
    free(results);
}

/* Health thread: wake the main loop (event_active is thread-safe). */
static void
lb_health_notify(void *arg)
{
    struct lb_daemon *d = arg;

    event_active(d->health_ev, EV_READ, 0);
}

static void
lb_health_spec(struct hc_spec *spec, const struct lb_server *srv)
{
    const struct conf_pool *pc = srv->pool->conf;

    memset(spec, 0, sizeof(*spec));
    spec->id = srv->id;
    spec->kind = pc->check;
    memcpy(&spec->addr, &srv->conf->addr.ss, sizeof(spec->addr));
    spec->addr_len = srv->conf->addr.len;
    if (pc->check_port != 0) {
        if (spec->addr.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&spec->addr)->sin6_port = htons((uint16_t)pc->check_port);
        else
            ((struct sockaddr_in *)&spec->addr)->sin_port = htons((uint16_t)pc->check_port);
    }
    spec->host = pc->check_host[0] != '\0' ? pc->check_host : srv->conf->addr.text;
    spec->path = pc->check_path;
    spec->expect = pc->check_expect;
    spec->interval_ms = pc->check_interval_ms;
    spec->timeout_ms = pc->check_timeout_ms;
    spec->verify = pc->check_verify;
    spec->ca = pc->check_ca;
}

int
lb_health_start(struct lb_daemon *d, char *err, size_t errlen)
{
    struct lb_gen *g = d->gen;
    size_t nchecked = 0;
    char herr[200];

    for (size_t i = 0; i < g->nservers; i++)
        nchecked += g->servers_by_id[i]->pool->conf->check != CONF_CHECK_NONE;
    if (nchecked == 0)
        return 0;
    d->health_ev = event_new(d->base, -1, 0, lb_health_on_results, d);
    d->hc = hc_new(g->conf->health.threads, lb_health_notify, d, herr, sizeof(herr));
    if (d->health_ev == NULL || d->hc == NULL) {
        snprintf(err, errlen, "health checks: %s", d->hc == NULL ? herr : "out of memory");
        return -1;
    }
    for (size_t i = 0; i < g->nservers; i++) {
        const struct lb_server *srv = g->servers_by_id[i];
        struct hc_spec spec;

        if (srv->pool->conf->check == CONF_CHECK_NONE)
            continue;
        lb_health_spec(&spec, srv);
        if (hc_add(d->hc, &spec, herr, sizeof(herr)) == -1) {
            snprintf(err, errlen, "pool %s server %s: %s", srv->pool->conf->name,
                     srv->conf->name, herr);
            return -1;
        }
    }
    if (hc_start(d->hc) == -1) {
        snprintf(err, errlen, "health checks: cannot start threads");
        return -1;
    }
    lb_log(CONF_LOG_INFO, "health_start", "threads=%u servers=%zu",
           g->conf->health.threads, nchecked);
    return 0;
}

void
lb_health_stop(struct lb_daemon *d)
{
    hc_free(d->hc);
    d->hc = NULL;
    if (d->health_ev != NULL)
        event_free(d->health_ev);
    d->health_ev = NULL;
}
