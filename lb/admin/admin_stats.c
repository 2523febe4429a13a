/*
 * admin_stats.c - what the admin port shows: /stats as JSON and /metrics in
 * the Prometheus text format. Both are straight copies of the same figures,
 * under the names the contract gives them.
 *
 * Admin thread. What changes under daemon->state_lock is copied under it
 * into a snapshot (struct lb_stats_snap), with a reference on every
 * generation whose servers it names, and the document is built from the
 * copy after the lock is released: a slow client or a 10,000-server page
 * never delays a health verdict or an operator action. Counters the workers
 * bump are atomics, read without a lock.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "admin.h"
#include "daemon.h"
#include "reload.h"
#include "state.h"

#define LB_LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* A JSON string, escaped whatever it holds (RFC 8259: quote, backslash and
 * control characters; bytes >= 0x80 pass as they are). */
void
lb_json_str(struct evbuffer *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;

    LB_ADD_LIT(out, "\"");
    for (; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = { '\\', (char)*p };
            evbuffer_add(out, e, 2);
        } else if (*p < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 0xf] };
            evbuffer_add(out, e, 6);
        } else {
            evbuffer_add(out, p, 1);
        }
    }
    LB_ADD_LIT(out, "\"");
}

/* JSON has no NaN or infinity. */
static void
lb_json_num(struct evbuffer *out, double v)
{
    evbuffer_add_printf(out, "%.3f", isfinite(v) ? v : 0.0);
}

/* One server as /stats shows it: what state_lock guards, copied; the rest
 * (names, atomics) read through srv, whose generation the snapshot holds. */
struct lb_server_view {
    const struct lb_server *srv;
    bool in_rotation;
    bool is_guarded;
    struct bal_operator op;
    const char *health;                 /* lb_server_health_name */
    uint32_t consecutive_successes, consecutive_failures;
    uint64_t checks;
    struct lb_check_info last_check;
    double last_change;
    double last_detection_ms;
    uint32_t share;                     /* of its weight, BAL_SHARE_FULL parts */
    double ramp_progress;               /* slow start, 0..1; < 0: none */
    enum bal_beat beat;                 /* BAL_BEAT_OFF: no heartbeat_ttl */
    bool is_beat_expired;
    double beat_at;                     /* unix seconds, 0 = none yet */
    uint64_t heartbeats;
    char beat_note[LB_BEAT_NOTE_MAX];
    bool has_agent;                     /* agent_port= */
    struct bal_agent_verdict agent;
    uint32_t max_connections;           /* the cap in force (lb_server_cap) */
    bool has_agent_maxconn;
    uint32_t agent_maxconn;
    uint64_t agent_checks;
    struct lb_check_info last_agent;
    char agent_note[HC_AGENT_NOTE_MAX + 1];
    bool is_ejected;                    /* outlier detection */
    double eject_left_s;
    uint64_t ejections[BAL_OUTLIER_KINDS];
    uint64_t ejections_refused;
    char eject_reason[128];             /* "" before the first */
    bool is_ephemeral;
    double delete_in_s;                 /* ephemeral: its silence's time
                                           left; < 0: never (no heartbeat_ttl
                                           since a reload) */
};

struct lb_stats_snap {
    struct lb_gen *g;                   /* one reference */
    struct lb_server_view *servers;     /* g->servers, in that order */
    struct lb_pool_view {               /* per pool of g */
        size_t in_rotation;
        bool is_guard_active;
        struct lb_hist check_duration;
        bool is_discovering;
        struct lb_discover_status discovery;
        size_t discovered;
        struct lb_queue_view {
            uint32_t depth;
            uint64_t queued_total, timeouts_total, full_total;
            struct lb_hist wait;
        } queue;
    } *pools;
    struct lb_server_view *removed;     /* draining servers a reload removed */
    struct lb_gen **removed_gens;       /* one reference each, per entry */
    size_t nremoved;
    struct lb_health_stats health;
    uint64_t reloads_ok, reloads_failed;
    char *reload_error;                 /* malloc'd, or NULL */
    double started_at;
};

struct lb_server_view *
lb_admin_view_new(void)
{
    return calloc(1, sizeof(struct lb_server_view));
}

void
lb_admin_view_take(const struct lb_server *srv, struct lb_server_view *v)
{
    const struct lb_backend *b = srv->b;
    const struct conf_pool *pc = srv->pool->conf;
    uint64_t now = lb_mono_ms();

    *v = (struct lb_server_view){
        .srv = srv,
        .in_rotation = atomic_load_explicit(&b->live.in_rotation, memory_order_relaxed),
        .is_guarded = b->is_guarded,
        .op = b->op,
        .health = lb_server_health_name(srv),
        .consecutive_successes = b->health.consecutive_successes,
        .consecutive_failures = b->health.consecutive_failures,
        .checks = b->checks,
        .last_check = b->last_check != NULL ? *b->last_check : (struct lb_check_info){ 0 },
        .last_change = b->last_change,
        .last_detection_ms = b->last_detection_ms,
        .share = atomic_load_explicit(&b->live.share, memory_order_relaxed),
        .ramp_progress = b->ramp_since_ms == 0 || pc->slow_start_ms == 0 ? -1.0
                       : (double)(now > b->ramp_since_ms ? now - b->ramp_since_ms : 0) /
                         (double)pc->slow_start_ms,
        .beat = pc->heartbeat_ttl_ms > 0 ? b->beat : BAL_BEAT_OFF,
        .is_beat_expired = b->is_beat_expired,
        .beat_at = b->beat_at,
        .heartbeats = b->heartbeats,
        .has_agent = srv->conf->agent_port != 0,
        .agent = lb_server_agent(srv),
        .max_connections = lb_server_cap(srv),
        .has_agent_maxconn = b->has_agent_maxconn,
        .agent_maxconn = b->agent_maxconn,
        .agent_checks = b->agent_checks,
        .last_agent = b->last_agent != NULL ? *b->last_agent : (struct lb_check_info){ 0 },
    };
    snprintf(v->beat_note, sizeof(v->beat_note), "%s", b->beat_note != NULL ? b->beat_note : "");
    v->delete_in_s = -1;
    v->is_ephemeral = srv->conf->is_ephemeral;
    if (srv->conf->is_ephemeral && pc->heartbeat_ttl_ms > 0) {
        uint64_t after = pc->ephemeral_delete_after_ms;
        uint64_t silent = b->beat_at_ms != 0 && now > b->beat_at_ms ? now - b->beat_at_ms : 0;

        v->delete_in_s = silent < after ? (double)(after - silent) / 1000.0 : 0;
    }
    snprintf(v->agent_note, sizeof(v->agent_note), "%s", b->agent_note != NULL ? b->agent_note : "");
    if (pc->outlier.errors > 0 || b->is_ejected) {
        v->is_ejected = b->is_ejected;
        v->eject_left_s = b->is_ejected && b->eject_until_ms > now
                              ? (double)(b->eject_until_ms - now) / 1000.0 : 0;
        memcpy(v->ejections, b->ejections, sizeof(v->ejections));
        v->ejections_refused = b->ejections_refused;
        if (b->is_ejected || b->ejections_refused > 0 || b->ejected_at_ms != 0)
            lb_server_eject_reason(srv, v->eject_reason, sizeof(v->eject_reason));
    }
}

/* Caller holds state_lock. Servers a reload removed are listed while their
 * last connections drain; a removed server may sit in several replaced
 * generations: listed once. */
static int
lb_stats_snap_removed(struct lb_daemon *d, struct lb_stats_snap *sn)
{
    const struct lb_reload_figures *rf = lb_reload_figures(d);
    size_t cap = 0;

    for (size_t r = rf->nretired; r-- > 0;) {
        struct lb_gen *og = rf->retired[r];

        for (size_t i = 0; i < og->nservers; i++) {
            const struct lb_server *srv = og->servers[i];
            bool dup = false;

            if (!srv->b->is_removed || atomic_load(&srv->b->live.active_connections) == 0)
                continue;
            for (size_t k = 0; k < sn->nremoved && !dup; k++)
                dup = sn->removed[k].srv->b == srv->b;
            if (dup)
                continue;
            if (sn->nremoved == cap) {
                size_t nc = cap ? cap * 2 : 8;
                struct lb_server_view *v = realloc(sn->removed, nc * sizeof(*v));
                struct lb_gen **gs;

                if (v == NULL)
                    return -1;
                sn->removed = v;
                gs = realloc(sn->removed_gens, nc * sizeof(*gs));
                if (gs == NULL)
                    return -1;
                sn->removed_gens = gs;
                cap = nc;
            }
            lb_gen_ref(og);
            sn->removed_gens[sn->nremoved] = og;
            lb_admin_view_take(srv, &sn->removed[sn->nremoved++]);
        }
    }
    return 0;
}

static void
lb_stats_snap_free(struct lb_stats_snap *sn)
{
    for (size_t i = 0; i < sn->nremoved; i++)
        lb_gen_unref(sn->removed_gens[i]);
    free(sn->removed);
    free(sn->removed_gens);
    free(sn->servers);
    free(sn->pools);
    free(sn->reload_error);
    if (sn->g != NULL)
        lb_gen_unref(sn->g);
    memset(sn, 0, sizeof(*sn));
}

/* -1 when out of memory (nothing to free then). */
static int
lb_stats_snap_take(struct lb_daemon *d, struct lb_stats_snap *sn)
{
    int rc = 0;

    memset(sn, 0, sizeof(*sn));
    pthread_mutex_lock(&d->state_lock);
    sn->g = d->gen;
    lb_gen_ref(sn->g);
    sn->servers = calloc(sn->g->nservers ? sn->g->nservers : 1, sizeof(*sn->servers));
    sn->pools = calloc(sn->g->conf->npools ? sn->g->conf->npools : 1, sizeof(*sn->pools));
    if (sn->servers == NULL || sn->pools == NULL ||
        lb_stats_snap_removed(d, sn) == -1) {
        rc = -1;
    } else {
        /* g->servers runs pool by pool: the pool figures come with it */
        for (size_t i = 0, k = 0; i < sn->g->conf->npools; i++) {
            const struct lb_pool *p = &sn->g->pools[i];

            const struct lb_queue *q = &p->shared->queue;

            const struct lb_members *m = lb_members_of(d, p->conf->name);

            sn->pools[i].check_duration = p->shared->check_duration;
            if (m != NULL && p->conf->discover != CONF_DISCOVER_NONE) {
                sn->pools[i].is_discovering = true;
                sn->pools[i].discovery = m->status;
                sn->pools[i].discovered = m->ndns;
            }
            /* state_lock, then the queue's lock: the order queue.c allows */
            pthread_mutex_lock((pthread_mutex_t *)&q->lock);
            sn->pools[i].queue = (struct lb_queue_view){
                .depth = atomic_load(&q->depth), .queued_total = q->queued_total,
                .timeouts_total = q->timeouts_total, .full_total = q->full_total,
                .wait = q->wait,
            };
            pthread_mutex_unlock((pthread_mutex_t *)&q->lock);
            for (size_t j = 0; j < p->conf->nservers; j++, k++) {
                lb_admin_view_take(sn->g->servers[k], &sn->servers[k]);
                sn->pools[i].in_rotation += sn->servers[k].in_rotation;
                sn->pools[i].is_guard_active |= sn->servers[k].is_guarded;
            }
        }
        const struct lb_reload_figures *rf = lb_reload_figures(d);

        sn->health = *lb_state_health(d);
        sn->reloads_ok = rf->reloads_ok;
        sn->reloads_failed = rf->reloads_failed;
        if (rf->reload_error != NULL)
            sn->reload_error = strdup(rf->reload_error);
        sn->started_at = d->started_at;
    }
    pthread_mutex_unlock(&d->state_lock);
    if (rc == -1)
        lb_stats_snap_free(sn);
    return rc;
}

/* "agent": its verdict (what the agent said last that parsed), and its
 * last reply, which may have failed and changed nothing. */
static void
lb_admin_agent_json(struct evbuffer *out, const struct lb_server_view *v)
{
    evbuffer_add_printf(out, "{\"state\":\"%s\",\"share\":", bal_agent_name(v->agent.state));
    if (v->agent.has_share)
        lb_json_num(out, (double)v->agent.share / BAL_SHARE_FULL);
    else
        LB_ADD_LIT(out, "null");
    if (v->has_agent_maxconn)
        evbuffer_add_printf(out, ",\"maxconn\":%u", v->agent_maxconn);
    else
        LB_ADD_LIT(out, ",\"maxconn\":null");
    LB_ADD_LIT(out, ",\"note\":");
    lb_json_str(out, v->agent_note);
    if (v->last_agent.is_set) {
        evbuffer_add_printf(out, ",\"result\":\"%s\",\"detail\":",
                            v->last_agent.passed ? "passed" : "failed");
        lb_json_str(out, v->last_agent.detail);
        LB_ADD_LIT(out, ",\"at\":");
        lb_json_num(out, v->last_agent.at);
    } else {
        LB_ADD_LIT(out, ",\"result\":null,\"detail\":\"\",\"at\":null");
    }
    evbuffer_add_printf(out, ",\"total\":%llu}", (unsigned long long)v->agent_checks);
}

/* "outlier" (a pool with outlier, or a server still ejected after a
 * reload turned it off): ejected or not, why (the last ejection's reason,
 * or the last one the cap refused), the ejections by the kind that
 * weighed most, and the errors of live traffic seen by kind. */
static void
lb_admin_outlier_json(struct evbuffer *out, const struct lb_server_view *v)
{
    const struct lb_backend *b = v->srv->b;

    evbuffer_add_printf(out, "{\"ejected\":%s,\"reason\":", v->is_ejected ? "true" : "false");
    lb_json_str(out, v->eject_reason);
    LB_ADD_LIT(out, ",\"back_in_s\":");
    if (v->is_ejected)
        lb_json_num(out, v->eject_left_s);
    else
        LB_ADD_LIT(out, "null");
    for (int m = 0; m < 2; m++) {
        evbuffer_add_printf(out, m == 0 ? ",\"ejections\":{" : ",\"errors\":{");
        for (int k = 0; k < BAL_OUTLIER_KINDS; k++)
            evbuffer_add_printf(out, "%s\"%s\":%llu", k > 0 ? "," : "",
                                bal_outlier_kind_name((enum bal_outlier_kind)k),
                                (unsigned long long)(m == 0 ? v->ejections[k]
                                                            : LB_LOAD(b->live_errors[k])));
        LB_ADD_LIT(out, "}");
    }
    evbuffer_add_printf(out, ",\"refused_by_max_eject\":%llu}",
                        (unsigned long long)v->ejections_refused);
}

void
lb_admin_server_json(struct lb_daemon *d, const struct lb_server_view *v,
                     struct evbuffer *out)
{
    const struct lb_server *srv = v->srv;
    uint32_t active = bal_server_active(srv->pool->bal, srv->index);

    LB_ADD_LIT(out, "{\"name\":");
    lb_json_str(out, srv->conf->name);
    LB_ADD_LIT(out, ",\"address\":");
    lb_json_str(out, srv->conf->addr.text);
    evbuffer_add_printf(out,
        ",\"source\":\"%s\",\"weight\":%u,\"max_connections\":%u,\"state\":\"%s\",\"guarded\":%s,\"health\":\"%s\",\"admin\":\"%s\","
        "\"check\":\"%s\",\"active_connections\":%u,\"total_connections\":%llu,"
        "\"bytes_in\":%llu,\"bytes_out\":%llu,\"connect_failures\":%llu,"
        "\"drained_by_timeout\":%llu,\"live_failures\":%u,\"observed_probes\":%llu,"
        "\"consecutive_successes\":%u,\"consecutive_failures\":%u,\"checks_total\":%llu,"
        "\"udp_datagrams_sent\":%llu,\"udp_datagrams_received\":%llu,\"last_check\":",
        conf_source_name(srv->conf->source), v->op.weight == 0 ? 0 : srv->conf->weight,
        v->max_connections,
        bal_state_name(bal_state_of_agent(v->in_rotation, &v->op, &v->agent, active)),
        v->is_guarded ? "true" : "false",
        v->health,
        bal_admin_name(v->op.admin),
        conf_check_name(srv->pool->conf->check),
        active,
        (unsigned long long)LB_LOAD(srv->b->total_connections),
        (unsigned long long)LB_LOAD(srv->b->bytes_in),
        (unsigned long long)LB_LOAD(srv->b->bytes_out),
        (unsigned long long)LB_LOAD(srv->b->connect_failures),
        (unsigned long long)LB_LOAD(srv->b->drained_by_timeout),
        LB_LOAD(srv->b->live_failures),
        (unsigned long long)LB_LOAD(srv->b->observed_probes),
        v->consecutive_successes, v->consecutive_failures,
        (unsigned long long)v->checks,
        (unsigned long long)LB_LOAD(srv->b->udp_datagrams_sent),
        (unsigned long long)LB_LOAD(srv->b->udp_datagrams_received));
    if (v->last_check.is_set) {
        evbuffer_add_printf(out, "{\"result\":\"%s\",\"detail\":",
                            !v->last_check.passed ? "failed"
                            : v->last_check.is_warning ? "warning" : "passed");
        lb_json_str(out, v->last_check.detail);
        LB_ADD_LIT(out, ",\"duration_ms\":");
        lb_json_num(out, v->last_check.duration_ms);
        LB_ADD_LIT(out, ",\"at\":");
        lb_json_num(out, v->last_check.at);
        LB_ADD_LIT(out, "}");
    } else {
        LB_ADD_LIT(out, "null");
    }
    LB_ADD_LIT(out, ",\"last_change\":");
    lb_json_num(out, v->last_change > 0 ? v->last_change : d->started_at);
    LB_ADD_LIT(out, ",\"last_detection_ms\":");
    lb_json_num(out, v->last_detection_ms);
    /* share and effective_weight: what the algorithms weigh it by now */
    LB_ADD_LIT(out, ",\"share\":");
    lb_json_num(out, v->in_rotation ? (double)v->share / BAL_SHARE_FULL : 0);
    LB_ADD_LIT(out, ",\"effective_weight\":");
    lb_json_num(out, v->in_rotation ? (double)srv->conf->weight * v->share / BAL_SHARE_FULL : 0);
    LB_ADD_LIT(out, ",\"slow_start\":");
    if (v->ramp_progress >= 0) {
        LB_ADD_LIT(out, "{\"progress\":");
        lb_json_num(out, v->ramp_progress < 1 ? v->ramp_progress : 1);
        LB_ADD_LIT(out, "}");
    } else {
        LB_ADD_LIT(out, "null");
    }
    LB_ADD_LIT(out, ",\"heartbeat\":");
    if (v->beat != BAL_BEAT_OFF) {
        evbuffer_add_printf(out, "{\"status\":\"%s\",\"total\":%llu,\"last\":",
                            v->is_beat_expired ? "expired" : bal_beat_name(v->beat),
                            (unsigned long long)v->heartbeats);
        if (v->beat_at > 0)
            lb_json_num(out, v->beat_at);
        else
            LB_ADD_LIT(out, "null");
        LB_ADD_LIT(out, ",\"note\":");
        lb_json_str(out, v->beat_note);
        LB_ADD_LIT(out, "}");
    } else {
        LB_ADD_LIT(out, "null");
    }
    if (v->is_ephemeral)
        LB_ADD_LIT(out, ",\"ephemeral\":true,\"delete_in_s\":");
    else
        LB_ADD_LIT(out, ",\"ephemeral\":false,\"delete_in_s\":");
    if (v->delete_in_s >= 0)
        lb_json_num(out, v->delete_in_s);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, ",\"agent\":");
    if (v->has_agent)
        lb_admin_agent_json(out, v);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, ",\"outlier\":");
    if (srv->pool->conf->outlier.errors > 0 || v->is_ejected)
        lb_admin_outlier_json(out, v);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, "}");
}

/* "discovery": what the pool's DNS (or etcd) said last; status "ok" while the last
 * round succeeded, "failing" after a failed one (the servers of the last
 * good answer keep serving), "pending" before the first answer. */
static void
lb_stats_discovery_json(struct evbuffer *out, const struct conf_pool *pc,
                        const struct lb_pool_view *pv)
{
    const struct lb_discover_status *st = &pv->discovery;
    const char *status = st->is_failing       ? "failing"
                       : st->successes > 0 ? "ok"
                                           : "pending";

    bool is_etcd = pc->discover == CONF_DISCOVER_ETCD;

    evbuffer_add_printf(out, ",\"discovery\":{\"mode\":\"%s\",\"name\":",
                        is_etcd ? "etcd" : pc->discover == CONF_DISCOVER_DNS_A ? "dns-a"
                                                                              : "dns-srv");
    /* etcd: the prefix is what is asked; where and how far it has read */
    lb_json_str(out, is_etcd ? pc->discover_prefix : pc->discover_name);
    if (is_etcd) {
        LB_ADD_LIT(out, ",\"endpoint\":");
        if (st->endpoint[0] != '\0')
            lb_json_str(out, st->endpoint);
        else
            LB_ADD_LIT(out, "null");
        evbuffer_add_printf(out, ",\"revision\":%lld", (long long)st->revision);
    }
    evbuffer_add_printf(out, ",\"status\":\"%s\",\"servers_discovered\":%zu,"
                        "\"successes\":%llu,\"failures\":%llu,\"last_success\":",
                        status, pv->discovered, (unsigned long long)st->successes,
                        (unsigned long long)st->failures);
    if (st->last_success > 0)
        lb_json_num(out, st->last_success);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, ",\"last_failure\":");
    if (st->last_failure > 0)
        lb_json_num(out, st->last_failure);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, ",\"last_error\":");
    if (st->last_error[0] != '\0')
        lb_json_str(out, st->last_error);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, "}");
}

/* Pool i of the snapshot, its servers from sn->servers[first]. */
static void
lb_stats_pool_json(struct lb_daemon *d, const struct lb_stats_snap *sn, size_t i, size_t first,
                   struct evbuffer *out)
{
    const struct lb_pool *p = &sn->g->pools[i];
    const struct lb_server_view *v = &sn->servers[first];
    const struct lb_queue_view *qv = &sn->pools[i].queue;

    LB_ADD_LIT(out, "{\"name\":");
    lb_json_str(out, p->conf->name);
    evbuffer_add_printf(out,
        ",\"balance\":\"%s\",\"check\":\"%s\",\"servers_total\":%zu,\"in_rotation\":%zu,"
        "\"guard_active\":%s,\"min_servers\":%u,\"drain_timeout_ms\":%llu,"
        "\"queue\":{\"depth\":%u,\"max\":%u,\"timeout_ms\":%llu,\"queued_total\":%llu,"
        "\"timeouts_total\":%llu,\"full_total\":%llu,\"wait_ms_mean\":",
        conf_balance_name(p->conf->balance), conf_check_name(p->conf->check),
        p->conf->nservers, sn->pools[i].in_rotation,
        sn->pools[i].is_guard_active ? "true" : "false",
        bal_guard_floor(p->conf->min_servers.value, p->conf->min_servers.is_percent,
                        p->conf->nservers),
        (unsigned long long)p->conf->drain_timeout_ms, qv->depth, p->conf->queue_max,
        (unsigned long long)p->conf->queue_timeout_ms,
        (unsigned long long)qv->queued_total, (unsigned long long)qv->timeouts_total,
        (unsigned long long)qv->full_total);
    lb_json_num(out, qv->wait.count ? qv->wait.sum_ms / (double)qv->wait.count : 0);
    LB_ADD_LIT(out, "}");
    if (sn->pools[i].is_discovering)
        lb_stats_discovery_json(out, p->conf, &sn->pools[i]);
    LB_ADD_LIT(out, ",\"servers\":[");
    for (size_t k = 0; k < p->conf->nservers; k++) {
        if (k)
            LB_ADD_LIT(out, ",");
        lb_admin_server_json(d, &v[k], out);
    }
    LB_ADD_LIT(out, "]}");
}

int
lb_admin_pool_json(struct lb_daemon *d, const char *pool, struct evbuffer *out)
{
    struct lb_stats_snap sn;
    int rc = 1;

    if (lb_stats_snap_take(d, &sn) == -1)
        return -1;
    for (size_t i = 0, first = 0; rc == 1 && i < sn.g->conf->npools; i++) {
        if (strcmp(sn.g->pools[i].conf->name, pool) == 0) {
            lb_stats_pool_json(d, &sn, i, first, out);
            evbuffer_add(out, "\n", 1);
            rc = 0;
        }
        first += sn.g->pools[i].conf->nservers;
    }
    lb_stats_snap_free(&sn);
    return rc;
}

/* ,"key":{"reason":count,...} for counts v[0..n) named by name(). */
static void
lb_stats_reasons_json(struct evbuffer *out, const char *key, const _Atomic uint64_t *v, int n,
                      const char *(*name)(int))
{
    evbuffer_add_printf(out, ",\"%s\":{", key);
    for (int r = 0; r < n; r++)
        evbuffer_add_printf(out, "%s\"%s\":%llu", r == 0 ? "" : ",", name(r),
                            (unsigned long long)LB_LOAD(v[r]));
    LB_ADD_LIT(out, "}");
}

static const char *
lb_stats_fallback_name(int r)
{
    return lb_route_fallback_name((enum lb_route_fallback)r);
}

static const char *
lb_stats_proxy_bad_name(int r)
{
    return lb_proxy_bad_name((enum lb_proxy_bad)r);
}

static const char *
lb_stats_sni_bad_name(int r)
{
    return lb_sni_bad_name((enum lb_sni_bad)r);
}

/* A frontend routed by name: its routes with their counts, and where the
 * others went (README, "Routing TLS by name"). */
static void
lb_stats_frontend_routes_json(const struct lb_frontend *fe, struct evbuffer *out)
{
    const struct conf_frontend *fc = fe->conf;

    LB_ADD_LIT(out, ",\"routes\":[");
    for (size_t i = 0; i < fc->routes.n; i++) {
        if (i)
            LB_ADD_LIT(out, ",");
        LB_ADD_LIT(out, "{\"route\":");
        lb_json_str(out, fc->routes.v[i].pattern);
        LB_ADD_LIT(out, ",\"pool\":");
        lb_json_str(out, fc->routes.v[i].pool_name);
        evbuffer_add_printf(out, ",\"sessions\":%llu}",
                            (unsigned long long)LB_LOAD(fe->routes[i].stats->sessions));
    }
    LB_ADD_LIT(out, "],\"default_pool\":");
    if (fc->default_pool != NULL)
        lb_json_str(out, fc->default_pool);
    else
        LB_ADD_LIT(out, "null");
    evbuffer_add_printf(out, ",\"route_unknown\":\"%s\"",
                        conf_route_unknown_name(fc->route_unknown));
    lb_stats_reasons_json(out, "route_default", fe->stats->route_default, LB_ROUTE_FALLBACKS,
                          lb_stats_fallback_name);
    lb_stats_reasons_json(out, "route_closed", fe->stats->route_closed, LB_ROUTE_FALLBACKS,
                          lb_stats_fallback_name);
    lb_stats_reasons_json(out, "sni_unroutable", fe->stats->sni_bad, LB_SNI_BADS,
                          lb_stats_sni_bad_name);
}

static const char *
lb_stats_udp_drop_name(int r)
{
    return lb_udp_drop_name((enum lb_udp_drop)r);
}

/* A UDP frontend's flows and datagrams (README, "UDP"). */
static void
lb_stats_frontend_udp_json(const struct lb_frontend *fe, struct evbuffer *out)
{
    const struct lb_fe_stats *st = fe->stats;

    evbuffer_add_printf(out, ",\"udp\":{\"flows\":%u,\"flows_total\":%llu,"
                        "\"flows_evicted\":%llu,\"datagrams_received\":%llu,"
                        "\"datagrams_sent\":%llu,\"bytes_received\":%llu,\"bytes_sent\":%llu",
                        LB_LOAD(st->udp_flows), (unsigned long long)LB_LOAD(st->udp_flows_total),
                        (unsigned long long)LB_LOAD(st->udp_flows_evicted),
                        (unsigned long long)LB_LOAD(st->udp_datagrams_received),
                        (unsigned long long)LB_LOAD(st->udp_datagrams_sent),
                        (unsigned long long)LB_LOAD(st->udp_bytes_received),
                        (unsigned long long)LB_LOAD(st->udp_bytes_sent));
    lb_stats_reasons_json(out, "dropped", st->udp_dropped, LB_UDP_DROPS, lb_stats_udp_drop_name);
    LB_ADD_LIT(out, "}");
}

/* A frontend's refusals by reason, and its source table when a per-source
 * limit is set. */
static void
lb_stats_frontend_access_json(const struct lb_frontend *fe, struct evbuffer *out)
{
    const struct conf_frontend *fc = fe->conf;

    LB_ADD_LIT(out, ",\"denied\":{");
    for (int r = LB_DENY_ACL; r < LB_DENY_REASONS; r++)
        evbuffer_add_printf(out, "%s\"%s\":%llu", r == LB_DENY_ACL ? "" : ",",
                            lb_deny_reason_name((enum lb_deny_reason)r),
                            (unsigned long long)LB_LOAD(fe->stats->denied[r]));
    LB_ADD_LIT(out, "}");
    lb_stats_reasons_json(out, "proxy_header_bad", fe->stats->proxy_bad, LB_PROXY_BADS,
                          lb_stats_proxy_bad_name);
    if (fe->stats->sources != NULL &&
        (fc->max_connections_per_source != 0 || fc->rate_per_source != 0)) {
        struct lb_sources_stats st;

        lb_sources_stats(fe->stats->sources, &st);
        evbuffer_add_printf(out, ",\"sources\":{\"entries\":%llu,\"size\":%llu,\"bytes\":%llu,"
                            "\"evictions\":%llu,\"untracked\":%llu}",
                            (unsigned long long)st.entries, (unsigned long long)st.size,
                            (unsigned long long)st.bytes, (unsigned long long)st.evictions,
                            (unsigned long long)st.untracked);
    }
}

int
lb_admin_stats_json(struct lb_daemon *d, struct evbuffer *out)
{
    struct lb_stats_snap sn;
    const struct lb_gen *g;
    double now = lb_wall_now();

    if (lb_stats_snap_take(d, &sn) == -1)
        return -1;
    g = sn.g;
    evbuffer_add_printf(out, "{\"version\":\"%s\",\"uptime_s\":", LB_VERSION);
    lb_json_num(out, now - sn.started_at);
    LB_ADD_LIT(out, ",\"frontends\":[");
    for (size_t i = 0; i < g->conf->nfrontends; i++) {
        const struct lb_frontend *fe = &g->frontends[i];

        if (i)
            LB_ADD_LIT(out, ",");
        LB_ADD_LIT(out, "{\"name\":");
        lb_json_str(out, fe->conf->name);
        LB_ADD_LIT(out, ",\"listen\":");
        lb_json_str(out, fe->conf->listen.text);
        evbuffer_add_printf(out, ",\"protocol\":\"%s\",\"pool\":",
                            conf_protocol_name(fe->conf->protocol));
        if (fe->pool != NULL)
            lb_json_str(out, fe->conf->pool_name);
        else
            LB_ADD_LIT(out, "null");
        evbuffer_add_printf(out, ",\"active_connections\":%llu,\"total_connections\":%llu",
                            (unsigned long long)LB_LOAD(fe->stats->active_connections),
                            (unsigned long long)LB_LOAD(fe->stats->total_connections));
        lb_stats_frontend_access_json(fe, out);
        if (fe->pool == NULL)
            lb_stats_frontend_routes_json(fe, out);
        if (fe->conf->protocol == CONF_PROTOCOL_UDP)
            lb_stats_frontend_udp_json(fe, out);
        LB_ADD_LIT(out, "}");
    }
    LB_ADD_LIT(out, "],\"pools\":[");
    for (size_t i = 0, first = 0; i < g->conf->npools; i++) {
        if (i)
            LB_ADD_LIT(out, ",");
        lb_stats_pool_json(d, &sn, i, first, out);
        first += g->pools[i].conf->nservers;
    }
    LB_ADD_LIT(out, "],\"removed_servers\":[");
    for (size_t i = 0; i < sn.nremoved; i++) {
        if (i)
            LB_ADD_LIT(out, ",");
        LB_ADD_LIT(out, "{\"pool\":");
        lb_json_str(out, sn.removed[i].srv->pool->conf->name);
        LB_ADD_LIT(out, ",\"server\":");
        lb_admin_server_json(d, &sn.removed[i], out);
        LB_ADD_LIT(out, "}");
    }
    evbuffer_add_printf(out, "],\"health\":{\"checks_total\":%llu,\"detections_down\":%llu,"
                        "\"detections_up\":%llu,\"lag_ms_mean\":",
                        (unsigned long long)sn.health.checks,
                        (unsigned long long)sn.health.detection_down.count,
                        (unsigned long long)sn.health.detection_up.count);
    lb_json_num(out, sn.health.lag.count ? sn.health.lag.sum_ms / (double)sn.health.lag.count : 0);
    evbuffer_add_printf(out, "},\"connections\":{\"active\":%u,\"max\":%u},"
                        "\"reloads\":{\"ok\":%llu,\"failed\":%llu,\"generation\":%llu,"
                        "\"last_error\":",
                        LB_LOAD(d->limit.active), LB_LOAD(d->limit.max),
                        (unsigned long long)sn.reloads_ok, (unsigned long long)sn.reloads_failed,
                        (unsigned long long)g->number);
    if (sn.reload_error != NULL)
        lb_json_str(out, sn.reload_error);
    else
        LB_ADD_LIT(out, "null");
    LB_ADD_LIT(out, "}}\n");
    lb_stats_snap_free(&sn);
    return 0;
}

/* ---------------------------------------------------------------- metrics */

/* A label value: backslash, quote and newline escaped (exposition format). */
static void
lb_prom_label(struct evbuffer *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            evbuffer_add_printf(out, "\\%c", *s);
        else if (*s == '\n')
            LB_ADD_LIT(out, "\\n");
        else
            evbuffer_add(out, s, 1);
    }
}

/* One sample with one label: name{key="value"} v */
static void
lb_prom_one(struct evbuffer *out, const char *name, const char *key, const char *value,
            uint64_t v)
{
    evbuffer_add_printf(out, "%s{%s=\"", name, key);
    lb_prom_label(out, value);
    evbuffer_add_printf(out, "\"} %llu\n", (unsigned long long)v);
}

static void
lb_prom_head(struct evbuffer *out, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The per-server lines, 17 and more per server (9 MB at 10,000 servers),
 * are formatted by hand into blocks that the evbuffer takes over
 * (evbuffer_add_reference, freed once sent): a printf and a few
 * evbuffer_adds per line, each chain of a few KiB a malloc that grew the
 * admin thread's heap, took 37 ms at 10,000 servers (24-43 ms now). */
#define LB_PROM_BLOCK_MAX (4 << 20)
#define LB_PROM_HUGE (2 << 20)

struct lb_prom_w {
    struct evbuffer *out;
    size_t size;          /* of a block: what the servers' lines should
                             take, within 64 KiB .. 4 MiB */
    char *block;          /* NULL when out of memory: lines go straight
                             to out, slower */
    size_t used;
};

/* A block of 2 MiB or more in huge pages where the kernel allows it
 * (transparent_hugepage = madvise, Debian's default): a page fault per
 * 2 MiB instead of per 4 KiB, and those faults cost more than the lines
 * in a virtual machine. */
static char *
lb_prom_w_block(size_t size)
{
    char *b;

    if (size < LB_PROM_HUGE)
        return malloc(size);
    size = (size + LB_PROM_HUGE - 1) / LB_PROM_HUGE * LB_PROM_HUGE;  /* aligned_alloc's rule */
    b = aligned_alloc(LB_PROM_HUGE, size);
    if (b != NULL)
        (void)madvise(b, size, MADV_HUGEPAGE);
    return b;
}

static void
lb_prom_w_free_block(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

/* Hands the block over; is_last: no new one. */
static void
lb_prom_w_flush(struct lb_prom_w *w, bool is_last)
{
    if (w->block == NULL)
        return;
    if (w->used == 0 ||
        evbuffer_add_reference(w->out, w->block, w->used, lb_prom_w_free_block, NULL) != 0)
        free(w->block);
    w->block = is_last ? NULL : lb_prom_w_block(w->size);
    w->used = 0;
}

static void
lb_prom_w_put(struct lb_prom_w *w, const char *s, size_t n)
{
    if (w->block != NULL && w->used + n > w->size)
        lb_prom_w_flush(w, false);
    if (w->block == NULL || n > w->size) {
        evbuffer_add(w->out, s, n);
        return;
    }
    memcpy(w->block + w->used, s, n);
    w->used += n;
}

static void
lb_prom_w_str(struct lb_prom_w *w, const char *s)
{
    lb_prom_w_put(w, s, strlen(s));
}

/* " 123\n" */
static void
lb_prom_w_value(struct lb_prom_w *w, uint64_t v)
{
    char tmp[24];
    size_t k = sizeof(tmp);

    tmp[--k] = '\n';
    do {
        tmp[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    tmp[--k] = ' ';
    lb_prom_w_put(w, tmp + k, sizeof(tmp) - k);
}

/* Every server's labels, pool="P",server="S" (and removed="true" for one a
 * reload removed, still draining: a server of the same name may be back
 * in its pool), written once per scrape: server i's are text + at[i] up to
 * at[i + 1]. Names hold no backslash, quote or newline (conf/ checks
 * them): nothing to escape. */
struct lb_prom_labels {
    char *text;
    size_t *at;
};

static const struct lb_server_view *
lb_prom_view(const struct lb_stats_snap *sn, size_t i)
{
    return i < sn->g->nservers ? &sn->servers[i] : &sn->removed[i - sn->g->nservers];
}

static int
lb_prom_labels_make(const struct lb_stats_snap *sn, struct lb_prom_labels *l)
{
    size_t n = sn->g->nservers + sn->nremoved, size = 1;

    for (size_t i = 0; i < n; i++) {
        const struct lb_server *srv = lb_prom_view(sn, i)->srv;

        size += strlen(srv->pool->conf->name) + strlen(srv->conf->name) + 40;
    }
    l->text = malloc(size);
    l->at = malloc((n + 1) * sizeof(*l->at));
    if (l->text == NULL || l->at == NULL) {
        free(l->text);
        free(l->at);
        return -1;
    }
    l->at[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const struct lb_server *srv = lb_prom_view(sn, i)->srv;
        int len = snprintf(l->text + l->at[i], size - l->at[i], "pool=\"%s\",server=\"%s\"%s",
                           srv->pool->conf->name, srv->conf->name,
                           i >= sn->g->nservers ? ",removed=\"true\"" : "");

        l->at[i + 1] = l->at[i] + (size_t)len;
    }
    return 0;
}

static void
lb_prom_w_head(struct lb_prom_w *w, const char *name, const char *type, const char *help)
{
    lb_prom_w_str(w, "# HELP ");
    lb_prom_w_str(w, name);
    lb_prom_w_put(w, " ", 1);
    lb_prom_w_str(w, help);
    lb_prom_w_str(w, "\n# TYPE ");
    lb_prom_w_str(w, name);
    lb_prom_w_put(w, " ", 1);
    lb_prom_w_str(w, type);
    lb_prom_w_put(w, "\n", 1);
}

/* name{pool="P",server="S"EXTRA} */
static void
lb_prom_w_server(struct lb_prom_w *w, const char *name, const struct lb_prom_labels *l,
                 size_t i, const char *extra)
{
    lb_prom_w_str(w, name);
    lb_prom_w_put(w, "{", 1);
    lb_prom_w_put(w, l->text + l->at[i], l->at[i + 1] - l->at[i]);
    lb_prom_w_str(w, extra);
    lb_prom_w_put(w, "}", 1);
}

/* The state an operator reads, and "warning" for an up one at warn_weight:
 * lb_server_state's one-hot, as haproxy_server_status{state=...}. */
static const char *
lb_prom_state_of(const struct lb_server_view *v)
{
    uint32_t active = bal_server_active(v->srv->pool->bal, v->srv->index);
    enum bal_state st = bal_state_of_agent(v->in_rotation, &v->op, &v->agent, active);

    return st == BAL_STATE_UP && strcmp(v->health, "warning") == 0 ? "warning"
                                                                   : bal_state_name(st);
}

static const char *const lb_prom_states[] = { "up", "draining", "down", "disabled", "warning" };

/* Descriptors open and allowed, resident memory, CPU time and the start
 * time: the standard process_* family of Prometheus's clients. */
static void
lb_prom_process(struct evbuffer *out, double started_at)
{
    struct rlimit rl;
    struct rusage ru;
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long size = 0, resident = 0;
    size_t fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    FILE *f = fopen("/proc/self/statm", "r");

    if (dir != NULL) {
        for (struct dirent *e; (e = readdir(dir)) != NULL;)
            fds += e->d_name[0] != '.';
        closedir(dir);
        fds--;                          /* the one opendir holds */
    }
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    getrusage(RUSAGE_SELF, &ru);
    getrlimit(RLIMIT_NOFILE, &rl);
    lb_prom_head(out, "process_open_fds", "gauge", "Number of open file descriptors");
    evbuffer_add_printf(out, "process_open_fds %zu\n", fds);
    lb_prom_head(out, "process_max_fds", "gauge", "Maximum number of open file descriptors");
    evbuffer_add_printf(out, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    lb_prom_head(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes");
    evbuffer_add_printf(out, "process_resident_memory_bytes %llu\n",
                        resident * (unsigned long long)(page > 0 ? page : 4096));
    lb_prom_head(out, "process_cpu_seconds_total", "counter",
                 "Total user and system CPU time spent in seconds");
    evbuffer_add_printf(out, "process_cpu_seconds_total %.6f\n",
                        (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                        (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    lb_prom_head(out, "process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds");
    evbuffer_add_printf(out, "process_start_time_seconds %.3f\n", started_at);
}

/* One histogram in seconds; labels is "" or `key="value"`. */
static void
lb_prom_hist(struct evbuffer *out, const char *name, const char *labels,
             const struct lb_hist *h)
{
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";

    for (size_t i = 0; i < LB_HIST_BUCKETS; i++) {
        cum += h->buckets[i];
        evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                            lb_hist_bounds_ms[i] / 1000.0, (unsigned long long)cum);
    }
    evbuffer_add_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                        (unsigned long long)h->count);
    evbuffer_add_printf(out, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels,
                        labels[0] ? "}" : "", h->sum_ms / 1000.0);
    evbuffer_add_printf(out, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
                        labels[0] ? "}" : "", (unsigned long long)h->count);
}

typedef uint64_t (*lb_prom_server_pt)(const struct lb_server_view *v);

/* "up" is "in rotation", whatever is open */
static uint64_t lb_prom_up(const struct lb_server_view *v)
{ return v->in_rotation; }
static uint64_t lb_prom_active(const struct lb_server_view *v)
{ return bal_server_active(v->srv->pool->bal, v->srv->index); }
static uint64_t lb_prom_total(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->total_connections); }
static uint64_t lb_prom_bytes_in(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->bytes_in); }
static uint64_t lb_prom_bytes_out(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->bytes_out); }
static uint64_t lb_prom_failures(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->connect_failures); }
static uint64_t lb_prom_drained(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->drained_by_timeout); }
static uint64_t lb_prom_observed(const struct lb_server_view *v)
{ return LB_LOAD(v->srv->b->observed_probes); }
static uint64_t lb_prom_guarded(const struct lb_server_view *v)
{ return v->is_guarded; }
static uint64_t lb_prom_checks(const struct lb_server_view *v)
{ return v->checks; }
static uint64_t lb_prom_consec_fail(const struct lb_server_view *v)
{ return v->consecutive_failures; }
static uint64_t lb_prom_max_conns(const struct lb_server_view *v)
{ return v->srv->conf->max_connections; }

/* The per-server families: one table, one loop. */
static const struct {
    const char *name, *type, *help;
    lb_prom_server_pt value;
} lb_prom_server_metrics[] = {
    { "lb_server_up", "gauge", "1 when the server is in rotation (state up)", lb_prom_up },
    { "lb_server_active_connections", "gauge", "Open client connections relayed to the server", lb_prom_active },
    { "lb_server_connections_total", "counter", "Connections relayed to the server", lb_prom_total },
    { "lb_server_bytes_in_total", "counter", "Bytes received from the server", lb_prom_bytes_in },
    { "lb_server_bytes_out_total", "counter", "Bytes sent to the server", lb_prom_bytes_out },
    { "lb_server_connect_failures_total", "counter", "Failed connects to the server", lb_prom_failures },
    { "lb_server_drained_by_timeout_total", "counter", "Connections closed by drain_timeout or disable", lb_prom_drained },
    { "lb_server_observed_probes_total", "counter", "Out-of-schedule probes asked by live connect failures", lb_prom_observed },
    { "lb_server_guarded", "gauge", "1 when failing but held in rotation by min_servers", lb_prom_guarded },
    { "lb_server_checks_total", "counter", "Health probes completed", lb_prom_checks },
    { "lb_server_consecutive_failures", "gauge", "Current run of failed probes", lb_prom_consec_fail },
    { "lb_server_max_connections", "gauge", "The server's max_connections (0: no cap)", lb_prom_max_conns },
};

/* The per-pool queue counters: one table, one loop. */
static const struct {
    const char *name, *type, *help;
    size_t offset;                      /* of a uint64_t in lb_queue_view */
} lb_prom_queue_metrics[] = {
    { "lb_pool_queued_total", "counter", "Clients that waited in the pool's queue",
      offsetof(struct lb_queue_view, queued_total) },
    { "lb_pool_queue_timeouts_total", "counter", "Queued clients closed by queue_timeout",
      offsetof(struct lb_queue_view, timeouts_total) },
    { "lb_pool_queue_full_total", "counter", "Clients refused because queue_max were waiting",
      offsetof(struct lb_queue_view, full_total) },
};

/* The per-pool histograms: one table, one loop. Probe durations and queue
 * waits come from the snapshot (main writes them under state_lock); the
 * workers' connect and session times are read from their atomics. */
typedef void (*lb_prom_pool_hist_pt)(const struct lb_stats_snap *sn, size_t i,
                                     struct lb_hist *out);

static void lb_prom_hist_check(const struct lb_stats_snap *sn, size_t i, struct lb_hist *out)
{ *out = sn->pools[i].check_duration; }
static void lb_prom_hist_queue(const struct lb_stats_snap *sn, size_t i, struct lb_hist *out)
{ *out = sn->pools[i].queue.wait; }
static void lb_prom_hist_connect(const struct lb_stats_snap *sn, size_t i, struct lb_hist *out)
{ lb_ahist_read(&sn->g->pools[i].shared->connect_time, out); }
static void lb_prom_hist_session(const struct lb_stats_snap *sn, size_t i, struct lb_hist *out)
{ lb_ahist_read(&sn->g->pools[i].shared->session_duration, out); }

static const struct {
    const char *name, *help;
    lb_prom_pool_hist_pt read;
} lb_prom_pool_hists[] = {
    { "lb_check_duration_seconds", "Health probe durations (connect + request + status line)",
      lb_prom_hist_check },
    { "lb_pool_queue_wait_seconds", "How long served clients waited in the pool's queue",
      lb_prom_hist_queue },
    { "lb_pool_connect_seconds", "Time of each server connect that succeeded",
      lb_prom_hist_connect },
    { "lb_pool_session_duration_seconds",
      "From accept to close, of each client connection that ended", lb_prom_hist_session },
};

/* name{frontend="F",reason="R"} v */
static void
lb_prom_reason(struct evbuffer *out, const char *name, const char *frontend, const char *reason,
               uint64_t v)
{
    evbuffer_add_printf(out, "%s{frontend=\"", name);
    lb_prom_label(out, frontend);
    evbuffer_add_printf(out, "\",reason=\"%s\"} %llu\n", reason, (unsigned long long)v);
}

/* Refused clients and headers, and the source tables (README, "Client
 * addresses and access control"). */
static void
lb_prom_frontend_access(const struct lb_gen *g, struct evbuffer *out)
{
    static const struct { const char *name, *help; } tables[] = {
        { "lb_frontend_source_table_entries", "Source addresses the per-source limits track" },
        { "lb_frontend_source_table_bytes", "Memory the source table holds" },
        { "lb_frontend_source_table_evictions_total",
          "Idle sources dropped from a full table, least recently seen first" },
        { "lb_frontend_source_table_untracked_total",
          "Connections let in uncounted: every entry of the table had connections open" },
    };

    lb_prom_head(out, "lb_frontend_denied_total", "counter",
                 "Clients refused by allow/deny, accept_proxy_from or a per-source limit");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        for (int r = LB_DENY_ACL; r < LB_DENY_REASONS; r++)
            lb_prom_reason(out, "lb_frontend_denied_total", g->frontends[i].conf->name,
                           lb_deny_reason_name((enum lb_deny_reason)r),
                           LB_LOAD(g->frontends[i].stats->denied[r]));
    lb_prom_head(out, "lb_frontend_proxy_header_bad_total", "counter",
                 "Connections closed for a bad, late or missing PROXY header");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        if (g->frontends[i].conf->accept_proxy != CONF_PROXY_OFF)
            for (int b = 0; b < LB_PROXY_BADS; b++)
                lb_prom_reason(out, "lb_frontend_proxy_header_bad_total",
                               g->frontends[i].conf->name, lb_proxy_bad_name((enum lb_proxy_bad)b),
                               LB_LOAD(g->frontends[i].stats->proxy_bad[b]));
    for (size_t m = 0; m < sizeof(tables) / sizeof(tables[0]); m++) {
        lb_prom_head(out, tables[m].name, m < 2 ? "gauge" : "counter", tables[m].help);
        for (size_t i = 0; i < g->conf->nfrontends; i++) {
            const struct lb_frontend *fe = &g->frontends[i];
            struct lb_sources_stats st;
            const uint64_t *v[] = { &st.entries, &st.bytes, &st.evictions, &st.untracked };

            if (fe->stats->sources == NULL)
                continue;
            lb_sources_stats(fe->stats->sources, &st);
            lb_prom_one(out, tables[m].name, "frontend", fe->conf->name, *v[m]);
        }
    }
}

/* Frontends routed by name (README, "Routing TLS by name"). */
static void
lb_prom_frontend_routes(const struct lb_gen *g, struct evbuffer *out)
{
    static const struct { const char *name, *help; } fallbacks[] = {
        { "lb_frontend_route_default_sessions_total",
          "Clients sent to default_pool: no SNI, no route matched, or no ClientHello read" },
        { "lb_frontend_route_closed_total",
          "Clients closed for want of a route (no default_pool, or route_unknown = close)" },
    };

    lb_prom_head(out, "lb_frontend_route_sessions_total", "counter",
                 "Clients routed by their SNI, per route");
    for (size_t i = 0; i < g->conf->nfrontends; i++) {
        const struct lb_frontend *fe = &g->frontends[i];

        for (size_t k = 0; k < fe->conf->routes.n; k++) {
            evbuffer_add_printf(out, "lb_frontend_route_sessions_total{frontend=\"");
            lb_prom_label(out, fe->conf->name);
            LB_ADD_LIT(out, "\",route=\"");
            lb_prom_label(out, fe->conf->routes.v[k].pattern);
            evbuffer_add_printf(out, "\"} %llu\n",
                                (unsigned long long)LB_LOAD(fe->routes[k].stats->sessions));
        }
    }
    for (size_t m = 0; m < 2; m++) {
        lb_prom_head(out, fallbacks[m].name, "counter", fallbacks[m].help);
        for (size_t i = 0; i < g->conf->nfrontends; i++) {
            const struct lb_frontend *fe = &g->frontends[i];
            const _Atomic uint64_t *v = m == 0 ? fe->stats->route_default
                                               : fe->stats->route_closed;

            for (int r = 0; fe->pool == NULL && r < LB_ROUTE_FALLBACKS; r++)
                lb_prom_reason(out, fallbacks[m].name, fe->conf->name,
                               lb_route_fallback_name((enum lb_route_fallback)r), LB_LOAD(v[r]));
        }
    }
    lb_prom_head(out, "lb_frontend_sni_unroutable_total", "counter",
                 "First flights that were no readable ClientHello, by why");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        for (int b = 0; g->frontends[i].pool == NULL && b < LB_SNI_BADS; b++)
            lb_prom_reason(out, "lb_frontend_sni_unroutable_total", g->frontends[i].conf->name,
                           lb_sni_bad_name((enum lb_sni_bad)b),
                           LB_LOAD(g->frontends[i].stats->sni_bad[b]));
}

/* UDP frontends and the servers of their pools (README, "UDP"). */
static void
lb_prom_frontend_udp(const struct lb_gen *g, struct evbuffer *out)
{
    static const struct { const char *name, *type, *help; size_t offset; } counts[] = {
        { "lb_frontend_udp_flows_total", "counter", "UDP flows opened",
          offsetof(struct lb_fe_stats, udp_flows_total) },
        { "lb_frontend_udp_flows_evicted_total", "counter",
          "UDP flows closed to make room (udp_max_flows, or out of descriptors)",
          offsetof(struct lb_fe_stats, udp_flows_evicted) },
    };
    static const struct { const char *name, *help; size_t offset[2]; } ways[] = {
        { "lb_frontend_udp_datagrams_total", "Datagrams from clients (received) and to them (sent)",
          { offsetof(struct lb_fe_stats, udp_datagrams_received),
            offsetof(struct lb_fe_stats, udp_datagrams_sent) } },
        { "lb_frontend_udp_bytes_total", "Datagram bytes from clients (received) and to them (sent)",
          { offsetof(struct lb_fe_stats, udp_bytes_received),
            offsetof(struct lb_fe_stats, udp_bytes_sent) } },
    };
    static const char *const directions[] = { "received", "sent" };

    lb_prom_head(out, "lb_frontend_udp_flows", "gauge", "UDP flows open");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        if (g->frontends[i].conf->protocol == CONF_PROTOCOL_UDP)
            lb_prom_one(out, "lb_frontend_udp_flows", "frontend", g->frontends[i].conf->name,
                        LB_LOAD(g->frontends[i].stats->udp_flows));
    for (size_t m = 0; m < sizeof(counts) / sizeof(counts[0]); m++) {
        lb_prom_head(out, counts[m].name, counts[m].type, counts[m].help);
        for (size_t i = 0; i < g->conf->nfrontends; i++)
            if (g->frontends[i].conf->protocol == CONF_PROTOCOL_UDP)
                lb_prom_one(out, counts[m].name, "frontend", g->frontends[i].conf->name,
                            LB_LOAD(*(const _Atomic uint64_t *)(const void *)
                                    ((const char *)g->frontends[i].stats + counts[m].offset)));
    }
    for (size_t m = 0; m < sizeof(ways) / sizeof(ways[0]); m++) {
        lb_prom_head(out, ways[m].name, "counter", ways[m].help);
        for (size_t i = 0; i < g->conf->nfrontends; i++) {
            for (size_t k = 0; g->frontends[i].conf->protocol == CONF_PROTOCOL_UDP && k < 2; k++) {
                evbuffer_add_printf(out, "%s{frontend=\"", ways[m].name);
                lb_prom_label(out, g->frontends[i].conf->name);
                evbuffer_add_printf(out, "\",direction=\"%s\"} %llu\n", directions[k],
                                    (unsigned long long)LB_LOAD(
                                        *(const _Atomic uint64_t *)(const void *)
                                        ((const char *)g->frontends[i].stats + ways[m].offset[k])));
            }
        }
    }
    lb_prom_head(out, "lb_frontend_udp_dropped_total", "counter",
                 "Datagrams from clients that went nowhere, by reason");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        for (int r = 0; g->frontends[i].conf->protocol == CONF_PROTOCOL_UDP && r < LB_UDP_DROPS; r++)
            lb_prom_reason(out, "lb_frontend_udp_dropped_total", g->frontends[i].conf->name,
                           lb_udp_drop_name((enum lb_udp_drop)r),
                           LB_LOAD(g->frontends[i].stats->udp_dropped[r]));
}

/* Outlier detection, for the servers of pools with outlier (README,
 * "Outlier detection"): ejections by the kind of error that weighed most,
 * live errors by kind, and whether ejected now. */
static void
lb_prom_outlier(struct lb_prom_w *w, const struct lb_stats_snap *sn,
                const struct lb_prom_labels *l)
{
    const struct lb_gen *g = sn->g;
    static const char *const names[] = { "lb_server_ejections_total",
                                         "lb_server_live_errors_total" };
    static const char *const helps[] = {
        "Ejections by outlier detection, by the kind of error that weighed most",
        "Errors of client traffic at the server, by kind",
    };

    for (int m = 0; m < 2; m++) {
        lb_prom_w_head(w, names[m], "counter", helps[m]);
        for (size_t i = 0; i < g->nservers; i++) {
            const struct lb_server_view *v = &sn->servers[i];

            for (int k = 0; v->srv->pool->conf->outlier.errors > 0 && k < BAL_OUTLIER_KINDS; k++) {
                char kind[64];

                snprintf(kind, sizeof(kind), ",kind=\"%s\"",
                         bal_outlier_kind_name((enum bal_outlier_kind)k));
                lb_prom_w_server(w, names[m], l, i, kind);
                lb_prom_w_value(w, m == 0 ? v->ejections[k] : LB_LOAD(v->srv->b->live_errors[k]));
            }
        }
    }
    lb_prom_w_head(w, "lb_server_ejected", "gauge",
                   "1 while outlier detection has the server out (the guard may hold it in)");
    for (size_t i = 0; i < g->nservers; i++)
        if (sn->servers[i].srv->pool->conf->outlier.errors > 0 || sn->servers[i].is_ejected) {
            lb_prom_w_server(w, "lb_server_ejected", l, i, "");
            lb_prom_w_value(w, sn->servers[i].is_ejected);
        }
}

/* The servers of pools that serve UDP: datagrams each way. */
static void
lb_prom_server_udp(struct lb_prom_w *w, const struct lb_stats_snap *sn,
                   const struct lb_prom_labels *l)
{
    lb_prom_w_head(w, "lb_server_udp_datagrams_total", "counter",
                 "Datagrams to the server (sent) and from it (received)");
    for (size_t i = 0; i < sn->g->nservers; i++) {
        const struct lb_server *srv = sn->g->servers[i];

        if (!srv->pool->serves_udp)
            continue;
        lb_prom_w_server(w, "lb_server_udp_datagrams_total", l, i, ",direction=\"sent\"");
        lb_prom_w_value(w, LB_LOAD(srv->b->udp_datagrams_sent));
        lb_prom_w_server(w, "lb_server_udp_datagrams_total", l, i, ",direction=\"received\"");
        lb_prom_w_value(w, LB_LOAD(srv->b->udp_datagrams_received));
    }
}

/* Every family with a line per server: the servers of the pools, then
 * those a reload removed while they drain (the server sums agree with
 * lb_active_connections), in the order the scrape had them before. */
static int
lb_prom_servers(struct evbuffer *out, const struct lb_stats_snap *sn)
{
    size_t n = sn->g->nservers + sn->nremoved;
    struct lb_prom_labels l;
    struct lb_prom_w wr = { .out = out }, *w = &wr;

    if (lb_prom_labels_make(sn, &l) == -1)
        return -1;
    /* 17 lines of about 55 bytes and the labels a server, and the heads */
    wr.size = n * 17 * 56 + l.at[n] + 8192;
    wr.size = wr.size < 65536 ? 65536 : wr.size > LB_PROM_BLOCK_MAX ? LB_PROM_BLOCK_MAX : wr.size;
    wr.block = lb_prom_w_block(wr.size);
    lb_prom_server_udp(w, sn, &l);
    for (size_t m = 0; m < sizeof(lb_prom_server_metrics) / sizeof(lb_prom_server_metrics[0]); m++) {
        lb_prom_w_head(w, lb_prom_server_metrics[m].name, lb_prom_server_metrics[m].type,
                     lb_prom_server_metrics[m].help);
        for (size_t i = 0; i < n; i++) {
            lb_prom_w_server(w, lb_prom_server_metrics[m].name, &l, i, "");
            lb_prom_w_value(w, lb_prom_server_metrics[m].value(lb_prom_view(sn, i)));
        }
    }
    lb_prom_outlier(w, sn, &l);
    lb_prom_w_head(w, "lb_server_state", "gauge",
                 "1 for the server's state: up, draining, down (pages), disabled (maintenance), warning");
    for (size_t i = 0; i < n; i++) {
        const char *state = lb_prom_state_of(lb_prom_view(sn, i));

        for (size_t k = 0; k < sizeof(lb_prom_states) / sizeof(lb_prom_states[0]); k++) {
            char extra[32];

            snprintf(extra, sizeof(extra), ",state=\"%s\"", lb_prom_states[k]);
            lb_prom_w_server(w, "lb_server_state", &l, i, extra);
            lb_prom_w_value(w, strcmp(state, lb_prom_states[k]) == 0);
        }
    }
    lb_prom_w_flush(w, true);
    free(l.text);
    free(l.at);
    return 0;
}

int
lb_admin_metrics(struct lb_daemon *d, struct evbuffer *out)
{
    struct lb_stats_snap sn;
    const struct lb_gen *g;

    if (lb_stats_snap_take(d, &sn) == -1)
        return -1;
    g = sn.g;
    lb_prom_head(out, "lb_info", "gauge", "Version of lb");
    evbuffer_add_printf(out, "lb_info{version=\"%s\"} 1\n", LB_VERSION);
    lb_prom_head(out, "lb_uptime_seconds", "gauge", "Seconds since start");
    evbuffer_add_printf(out, "lb_uptime_seconds %.3f\n", lb_wall_now() - sn.started_at);
    lb_prom_head(out, "lb_active_connections", "gauge", "Client connections open, all frontends");
    evbuffer_add_printf(out, "lb_active_connections %u\n", LB_LOAD(d->limit.active));
    lb_prom_head(out, "lb_max_connections", "gauge", "The max_connections cap");
    evbuffer_add_printf(out, "lb_max_connections %u\n", LB_LOAD(d->limit.max));

    lb_prom_head(out, "lb_frontend_active_connections", "gauge", "Client connections open");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        lb_prom_one(out, "lb_frontend_active_connections", "frontend", g->frontends[i].conf->name,
                    LB_LOAD(g->frontends[i].stats->active_connections));
    lb_prom_head(out, "lb_frontend_connections_total", "counter", "Client connections accepted");
    for (size_t i = 0; i < g->conf->nfrontends; i++)
        lb_prom_one(out, "lb_frontend_connections_total", "frontend", g->frontends[i].conf->name,
                    LB_LOAD(g->frontends[i].stats->total_connections));
    {
        static const struct { const char *name, *help; size_t offset; } fe_counters[] = {
            { "lb_frontend_retries_total", "Server connects retried after a failed one",
              offsetof(struct lb_fe_stats, retries) },
            { "lb_frontend_no_server_total", "Client connections closed without a server "
              "(none in rotation, every attempt failed, the queue full)",
              offsetof(struct lb_fe_stats, no_server) },
            { "lb_frontend_accept_failures_total", "accept(2) failures (out of descriptors "
              "or memory; accepts pause 100 ms)", offsetof(struct lb_fe_stats, accept_failures) },
        };

        for (size_t m = 0; m < sizeof(fe_counters) / sizeof(fe_counters[0]); m++) {
            lb_prom_head(out, fe_counters[m].name, "counter", fe_counters[m].help);
            for (size_t i = 0; i < g->conf->nfrontends; i++)
                lb_prom_one(out, fe_counters[m].name, "frontend", g->frontends[i].conf->name,
                            atomic_load_explicit((const _Atomic uint64_t *)(const void *)
                                ((const char *)g->frontends[i].stats + fe_counters[m].offset),
                                memory_order_relaxed));
        }
    }
    lb_prom_frontend_access(g, out);
    lb_prom_frontend_routes(g, out);
    lb_prom_frontend_udp(g, out);
    lb_prom_head(out, "lb_max_connections_reached_total", "counter",
                 "Times accepts paused because max_connections were open");
    evbuffer_add_printf(out, "lb_max_connections_reached_total %llu\n",
                        (unsigned long long)LB_LOAD(d->limit.reached));
    lb_prom_head(out, "lb_pool_servers", "gauge", "Servers configured in the pool");
    for (size_t i = 0; i < g->conf->npools; i++)
        lb_prom_one(out, "lb_pool_servers", "pool", g->pools[i].conf->name,
                    g->pools[i].conf->nservers);
    lb_prom_head(out, "lb_pool_guard_active", "gauge", "1 when min_servers holds failing servers");
    for (size_t i = 0; i < g->conf->npools; i++)
        lb_prom_one(out, "lb_pool_guard_active", "pool", g->pools[i].conf->name,
                    sn.pools[i].is_guard_active);
    lb_prom_head(out, "lb_pool_in_rotation", "gauge", "Servers of the pool in rotation");
    for (size_t i = 0; i < g->conf->npools; i++)
        lb_prom_one(out, "lb_pool_in_rotation", "pool", g->pools[i].conf->name,
                    sn.pools[i].in_rotation);
    /* the floor as a count, as /stats shows it: lb_pool_in_rotation below
     * it is a pool the guard could not hold (operators' servers count) */
    lb_prom_head(out, "lb_pool_min_servers", "gauge",
                 "The min_servers floor in servers (0: no guard)");
    for (size_t i = 0; i < g->conf->npools; i++)
        lb_prom_one(out, "lb_pool_min_servers", "pool", g->pools[i].conf->name,
                    bal_guard_floor(g->pools[i].conf->min_servers.value,
                                    g->pools[i].conf->min_servers.is_percent,
                                    g->pools[i].conf->nservers));
    /* pools with discover = only; /stats has the rest of the status */
    lb_prom_head(out, "lb_pool_discovery_failing", "gauge",
                 "1 while the last discovery round failed (the last good servers keep serving)");
    for (size_t i = 0; i < g->conf->npools; i++)
        if (sn.pools[i].is_discovering)
            lb_prom_one(out, "lb_pool_discovery_failing", "pool", g->pools[i].conf->name,
                        sn.pools[i].discovery.is_failing);
    lb_prom_head(out, "lb_pool_discovery_failures_total", "counter",
                 "Discovery rounds that failed");
    for (size_t i = 0; i < g->conf->npools; i++)
        if (sn.pools[i].is_discovering)
            lb_prom_one(out, "lb_pool_discovery_failures_total", "pool", g->pools[i].conf->name,
                        sn.pools[i].discovery.failures);
    lb_prom_head(out, "lb_pool_queue_depth", "gauge", "Clients waiting for a connection slot");
    for (size_t i = 0; i < g->conf->npools; i++)
        lb_prom_one(out, "lb_pool_queue_depth", "pool", g->pools[i].conf->name,
                    sn.pools[i].queue.depth);
    for (size_t m = 0; m < sizeof(lb_prom_queue_metrics) / sizeof(lb_prom_queue_metrics[0]); m++) {
        lb_prom_head(out, lb_prom_queue_metrics[m].name, lb_prom_queue_metrics[m].type,
                     lb_prom_queue_metrics[m].help);
        for (size_t i = 0; i < g->conf->npools; i++)
            lb_prom_one(out, lb_prom_queue_metrics[m].name, "pool", g->pools[i].conf->name,
                        *(const uint64_t *)(const void *)((const char *)&sn.pools[i].queue +
                                                          lb_prom_queue_metrics[m].offset));
    }
    if (lb_prom_servers(out, &sn) == -1) {
        lb_stats_snap_free(&sn);
        return -1;
    }
    for (size_t m = 0; m < sizeof(lb_prom_pool_hists) / sizeof(lb_prom_pool_hists[0]); m++) {
        lb_prom_head(out, lb_prom_pool_hists[m].name, "histogram", lb_prom_pool_hists[m].help);
        for (size_t i = 0; i < g->conf->npools; i++) {
            char labels[128];
            struct lb_hist h;

            /* conf/ limits names to [A-Za-z0-9_.-]: nothing to escape */
            snprintf(labels, sizeof(labels), "pool=\"%s\"", g->pools[i].conf->name);
            lb_prom_pool_hists[m].read(&sn, i, &h);
            lb_prom_hist(out, lb_prom_pool_hists[m].name, labels, &h);
        }
    }
    lb_prom_head(out, "lb_check_lag_seconds", "histogram",
                 "How late health probes started against their schedule");
    lb_prom_hist(out, "lb_check_lag_seconds", "", &sn.health.lag);
    lb_prom_head(out, "lb_detection_seconds", "histogram",
                 "From the first probe of a failing (or passing) streak to the change of rotation");
    lb_prom_hist(out, "lb_detection_seconds", "direction=\"down\"", &sn.health.detection_down);
    lb_prom_hist(out, "lb_detection_seconds", "direction=\"up\"", &sn.health.detection_up);
    lb_prom_head(out, "lb_reloads_total", "counter", "Config reloads by result");
    evbuffer_add_printf(out, "lb_reloads_total{result=\"ok\"} %llu\n"
                             "lb_reloads_total{result=\"failed\"} %llu\n",
                        (unsigned long long)sn.reloads_ok, (unsigned long long)sn.reloads_failed);
    lb_prom_process(out, sn.started_at);
    lb_stats_snap_free(&sn);
    return 0;
}
