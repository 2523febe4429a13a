/*
 * server.c - where health verdicts turn into rotation changes.
 *
 * Main thread (and the admin thread for operator actions), always under
 * daemon->state_lock. The health module hands over raw probe results; here
 * each one is checked against the newest result applied (a slow probe never
 * overwrites a newer one) and fed to the server's rise/fall state machine
 * (balancer/health.c). Health verdicts and operator actions are kept apart
 * and meet in one step, lb_pool_update_rotation(), which runs the
 * minimum-pool guard and moves servers in or out with lb_server_flip(): it
 * flips the balancer's atomic in_rotation flag that every worker reads on
 * its next pick (no lock, no message, no wait on the data path) and starts
 * or cancels the draining of the server's open connections.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lb.h"

const double lb_hist_bounds_ms[LB_HIST_BUCKETS] = {
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
};

void
lb_hist_observe(struct lb_hist *h, double ms)
{
    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        if (ms <= lb_hist_bounds_ms[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;         /* above the last bound: only in +Inf (= count) */
    h->sum_ms += ms;
}

static const char *const lb_server_state_names[] = {
    [LB_SERVER_UP] = "up",
    [LB_SERVER_DRAINING] = "draining",
    [LB_SERVER_DOWN] = "down",
    [LB_SERVER_DISABLED] = "disabled",
};

const char *
lb_server_state_name(enum lb_server_state st)
{
    return lb_server_state_names[st];
}

/*
 * The reported state, from the inputs kept apart:
 *
 *   admin      health    in rotation   open connections -> state
 *   none       up        yes           any              -> up
 *   none       down      no            > 0              -> draining
 *   none       down      no            0                -> down
 *   drain/dis. any       no            > 0              -> draining
 *   drain/dis. any       no            0                -> disabled
 * (disable closes the connections at once: draining lasts milliseconds)
 * (a guarded server is in rotation: up)
 * active is the caller's one read of the server's open connections, so that
 * a state and a count reported together agree ("draining" with 0 open, or
 * "disabled" with 1, when a worker closes one between two reads).
 */
enum lb_server_state
lb_server_state(const struct lb_server *srv, uint32_t active)
{
    const struct lb_backend *b = srv->b;

    if (b->is_in_rotation)
        return LB_SERVER_UP;
    /* after disable too, for the moment the workers take to close them */
    if (active > 0)
        return LB_SERVER_DRAINING;
    return b->admin != LB_ADMIN_NONE ? LB_SERVER_DISABLED : LB_SERVER_DOWN;
}

/* Sets when the server's open connections are closed: now + timeout, or
 * never (0) when it is back in rotation. */
static void
lb_server_set_drain(struct lb_daemon *d, struct lb_server *srv, uint64_t timeout_ms,
                    bool is_draining)
{
    uint64_t deadline = is_draining ? lb_mono_ms() + timeout_ms : 0;

    /* 0 is "no deadline": a deadline that lands on 0 becomes 1 */
    atomic_store(&srv->b->drain_deadline_ms, is_draining && deadline == 0 ? 1 : deadline);
    if (is_draining && bal_server_active(srv->pool->bal, srv->index) > 0) {
        atomic_fetch_add(&d->drain_epoch, 1);   /* workers scan on a change */
        lb_workers_notify(d);
    }
}

/* Moves one server in or out of rotation: the single removal step. It flips
 * the balancer's atomic flag, which every worker reads on its next pick, and
 * starts or cancels the draining of the server's open connections. */
static void
lb_server_flip(struct lb_daemon *d, struct lb_server *srv, bool in,
               const char *reason, double detection_ms)
{
    struct lb_pool *pool = srv->pool;
    char qbuf[HC_DETAIL_MAX * 2];

    srv->b->is_in_rotation = in;
    bal_server_set_in_rotation(pool->bal, srv->index, in);
    pool->in_rotation += in ? 1 : (size_t)-1;
    srv->b->last_change = lb_wall_now();
    lb_server_set_drain(d, srv, srv->b->admin == LB_ADMIN_DISABLE ? 0 : pool->conf->drain_timeout_ms,
                        !in);
    lb_log(in ? CONF_LOG_INFO : CONF_LOG_WARN, in ? "server_up" : "server_down",
           "pool=%s server=%s addr=%s reason=%s successes=%u failures=%u in_rotation=%zu/%zu detection_ms=%.0f",
           pool->conf->name, srv->conf->name, srv->conf->addr.text,
           lb_log_quote(qbuf, sizeof(qbuf), reason), srv->b->health.consecutive_successes,
           srv->b->health.consecutive_failures, pool->in_rotation, pool->conf->nservers,
           detection_ms);
}

/* Recomputes the rotation of a whole pool from each server's inputs (health
 * verdict, operator action) and the minimum-pool guard, and applies what
 * changed. Every way in or out of rotation comes through here. cause is the
 * server whose input just changed (its reason is logged); the others move
 * only because the guard holds or releases them. Caller holds state_lock. */
static void
lb_pool_update_rotation(struct lb_daemon *d, struct lb_pool *pool,
                        const struct lb_server *cause, const char *reason,
                        double detection_ms)
{
    const struct conf_pool *pc = pool->conf;
    struct bal_guard_server *gs = pool->guard_scratch;
    uint32_t floor = bal_guard_floor(pc->min_servers.value, pc->min_servers.is_percent,
                                     pc->nservers);
    size_t in_after = 0;
    bool active = false;

    for (size_t i = 0; i < pc->nservers; i++) {
        const struct lb_server *srv = &pool->servers[i];

        gs[i] = (struct bal_guard_server){
            .is_healthy = bal_health_is_up(&srv->b->health),
            /* A server a reload just added is not held: it has never
             * passed, and it waits for its first pass to serve. */
            .is_admin_out = srv->b->admin != LB_ADMIN_NONE ||
                            srv->b->health.state == BAL_HEALTH_PENDING,
            .was_guarded = srv->b->is_guarded,
            .down_since_ms = srv->b->down_since_ms,
        };
    }
    bal_guard_apply(gs, pc->nservers, floor);
    for (size_t i = 0; i < pc->nservers; i++)
        in_after += gs[i].in_rotation;

    for (size_t i = 0; i < pc->nservers; i++) {
        struct lb_server *srv = &pool->servers[i];
        char why[HC_DETAIL_MAX + 64];

        if (gs[i].guarded && !srv->b->is_guarded)
            lb_log(CONF_LOG_WARN, "guard_hold",
                   "pool=%s server=%s in_rotation=%zu min_servers=%u",
                   pc->name, srv->conf->name, in_after, floor);
        else if (!gs[i].guarded && srv->b->is_guarded)
            lb_log(CONF_LOG_INFO, "guard_release", "pool=%s server=%s health=%s",
                   pc->name, srv->conf->name, bal_health_state_name(srv->b->health.state));
        srv->b->is_guarded = gs[i].guarded;
        active |= gs[i].guarded;
        if (gs[i].in_rotation == srv->b->is_in_rotation)
            continue;
        if (srv == cause || cause == NULL) {
            lb_server_flip(d, srv, gs[i].in_rotation, reason, detection_ms);
        } else if (gs[i].in_rotation) {
            lb_server_flip(d, srv, true, "guard: held in rotation by min_servers", 0);
        } else {
            /* out because the guard let go: say why it was failing */
            snprintf(why, sizeof(why), "guard released: %s",
                     srv->b->last_check.is_set ? srv->b->last_check.detail : "failing");
            lb_server_flip(d, srv, false, why, 0);
        }
    }
    pool->guard_active = active;
}

void
lb_pool_update(struct lb_daemon *d, struct lb_pool *pool, const char *reason)
{
    lb_pool_update_rotation(d, pool, NULL, reason, 0);
}

void
lb_server_retire(struct lb_daemon *d, struct lb_server *srv)
{
    struct lb_backend *b = srv->b;

    b->is_removed = true;
    b->is_guarded = false;
    if (b->is_in_rotation) {
        b->is_in_rotation = false;
        bal_server_set_in_rotation(srv->pool->bal, srv->index, false);
        srv->pool->in_rotation--;
    }
    b->last_change = lb_wall_now();
    /* Drained with its pool's drain_timeout as the old config had it. */
    lb_server_set_drain(d, srv, srv->pool->conf->drain_timeout_ms, true);
    lb_log(CONF_LOG_INFO, "server_removed", "pool=%s server=%s addr=%s active=%u drain_timeout_ms=%llu",
           srv->pool->conf->name, srv->conf->name, srv->conf->addr.text,
           atomic_load(&b->active), (unsigned long long)srv->pool->conf->drain_timeout_ms);
}

void
lb_server_set_admin(struct lb_daemon *d, struct lb_server *srv,
                    enum lb_server_admin admin)
{
    static const char *const events[] = {
        [LB_ADMIN_NONE] = "server_enable",
        [LB_ADMIN_DRAIN] = "server_drain",
        [LB_ADMIN_DISABLE] = "server_disable",
    };
    static const char *const reasons[] = {
        [LB_ADMIN_NONE] = "operator: enable",
        [LB_ADMIN_DRAIN] = "operator: drain",
        [LB_ADMIN_DISABLE] = "operator: disable",
    };

    if (srv->b->admin == admin)
        return;
    srv->b->admin = admin;
    lb_log(CONF_LOG_INFO, events[admin], "pool=%s server=%s health=%s",
           srv->pool->conf->name, srv->conf->name,
           bal_health_state_name(srv->b->health.state));
    lb_pool_update_rotation(d, srv->pool, srv, reasons[admin], 0);
    /* Already out (a health verdict was draining it): disable still means
     * close its connections now. */
    if (admin == LB_ADMIN_DISABLE && !srv->b->is_in_rotation)
        lb_server_set_drain(d, srv, 0, true);
}

static void
lb_server_apply_check(struct lb_daemon *d, struct lb_server *srv,
                      const struct hc_result *r)
{
    struct lb_health_stats *st = &d->health;
    enum bal_health_change change;
    char qbuf[HC_DETAIL_MAX * 2];
    double detection_ms;

    if (r->seq <= srv->b->last_seq)
        return;                     /* older than what is known: drop */
    srv->b->last_seq = r->seq;
    srv->b->last_check.is_set = true;
    srv->b->last_check.passed = r->passed;
    memcpy(srv->b->last_check.detail, r->detail, sizeof(srv->b->last_check.detail));
    srv->b->last_check.duration_ms = r->duration_ms;
    srv->b->last_check.at = r->started_at;
    srv->b->checks++;
    st->checks++;
    if (r->lag_ms > srv->b->lag_ms_max)
        srv->b->lag_ms_max = r->lag_ms;
    lb_hist_observe(&st->lag, r->lag_ms);
    lb_hist_observe(&srv->pool->stats->check_duration, r->duration_ms);
    /* Logged before the transition it may cause, which the tests read as
     * its cause (harness.transition_streak). */
    lb_log(CONF_LOG_DEBUG, "check",
           "pool=%s server=%s result=%s detail=%s duration_ms=%.1f lag_ms=%.1f",
           srv->pool->conf->name, srv->conf->name, r->passed ? "passed" : "failed",
           lb_log_quote(qbuf, sizeof(qbuf), r->detail), r->duration_ms, r->lag_ms);

    change = bal_health_apply(&srv->b->health, r->passed, r->started_mono_ms);
    if (change == BAL_HEALTH_UNCHANGED)
        return;
    /* Detection time: from the start of the first probe of the streak to
     * now, when the verdict takes effect. */
    detection_ms = (double)(lb_mono_ms() - srv->b->health.streak_started_ms);
    srv->b->last_detection_ms = detection_ms;
    lb_hist_observe(change == BAL_HEALTH_WENT_DOWN ? &st->detection_down : &st->detection_up,
                    detection_ms);
    if (change == BAL_HEALTH_WENT_DOWN)
        srv->b->down_since_ms = srv->b->health.streak_started_ms;
    lb_pool_update_rotation(d, srv->pool, srv, r->detail, detection_ms);
}

static void
lb_health_on_results(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;
    struct lb_gen *g = d->gen;
    struct hc_result *results;
    size_t n = hc_take_results(d->hc, &results);

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < n; i++) {
        if (results[i].id < g->nby_id && g->by_id[results[i].id] != NULL)
            lb_server_apply_check(d, g->by_id[results[i].id], &results[i]);
    }
    pthread_mutex_unlock(&d->state_lock);
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
    spec->id = srv->b->id;
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

/* The check specs of every checked server of g; *out is malloc'd. */
static ssize_t
lb_health_specs(const struct lb_gen *g, struct hc_spec **out)
{
    struct hc_spec *specs = calloc(g->nservers ? g->nservers : 1, sizeof(*specs));
    size_t n = 0;

    if (specs == NULL)
        return -1;
    for (size_t i = 0; i < g->nservers; i++) {
        if (g->servers[i]->pool->conf->check != CONF_CHECK_NONE)
            lb_health_spec(&specs[n++], g->servers[i]);
    }
    *out = specs;
    return (ssize_t)n;
}

/* Creates and starts the health module for the specs (the first time a
 * generation has checked servers). */
static int
lb_health_create(struct lb_daemon *d, const struct lb_gen *g, const struct hc_spec *specs,
                 size_t n, char *err, size_t errlen)
{
    sigset_t old;
    char herr[200];
    int rc;

    d->health_ev = event_new(d->base, -1, 0, lb_health_on_results, d);
    d->hc = hc_new(g->conf->health.threads, lb_health_notify, d, herr, sizeof(herr));
    if (d->health_ev == NULL || d->hc == NULL) {
        snprintf(err, errlen, "health checks: %s", d->hc == NULL ? herr : "out of memory");
        lb_health_stop(d);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (hc_add(d->hc, &specs[i], herr, sizeof(herr)) == -1) {
            const struct lb_server *srv = g->by_id[specs[i].id];

            snprintf(err, errlen, "pool %s server %s: %s", srv->pool->conf->name,
                     srv->conf->name, herr);
            lb_health_stop(d);
            return -1;
        }
    }
    lb_signals_block(&old);
    rc = hc_start(d->hc);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == -1) {
        snprintf(err, errlen, "health checks: cannot start threads");
        lb_health_stop(d);
        return -1;
    }
    lb_log(CONF_LOG_INFO, "health_start", "threads=%u servers=%zu",
           g->conf->health.threads, n);
    return 0;
}

int
lb_health_start(struct lb_daemon *d, const struct lb_gen *g, char *err, size_t errlen)
{
    struct hc_spec *specs;
    ssize_t n = lb_health_specs(g, &specs);
    char herr[200];
    int rc = 0;

    if (n < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (d->hc == NULL && n > 0)
        rc = lb_health_create(d, g, specs, (size_t)n, err, errlen);
    else if (d->hc != NULL && hc_update(d->hc, specs, (size_t)n, herr, sizeof(herr)) == -1) {
        snprintf(err, errlen, "health checks: %s", herr);
        rc = -1;
    }
    free(specs);
    return rc;
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
