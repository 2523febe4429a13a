/*
 * server.c - where health verdicts, operator actions and reloads turn into
 * rotation changes.
 *
 * Main thread only (the admin port's orders come to main: admin_order.c),
 * always under daemon->state_lock, which the admin thread takes to read. Each path records its fact (a probe result fed to
 * rise/fall, an operator's action, a reload's new server set) and asks for
 * a decision over the whole pool: lb_decide() hands every server's inputs
 * to bal_rotation_decide() (balancer/rotation.c), the one place that
 * decides, and carries out what it returns: it flips the one rotation flag
 * the workers read on their next pick (struct bal_live: no lock, no
 * message, no wait on the data path), sets or clears the drain deadline of
 * the server's open connections, and logs the change with its reason.
 *
 * Besides probes and operators, three inputs reach the decision here: a
 * server's own heartbeats (heartbeat_ttl) and its agent's replies
 * (agent_port), which can only lower its health, and time, through a
 * 100 ms tick on main that expires heartbeats, moves slow-start ramps on
 * and ends ejections (outlier.c, the fourth input: errors of live
 * traffic).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "daemon.h"
#include "state.h"
#include "state_int.h"

/* What the decisions keep between them: main allocates it at start
 * (lb_state_init) and frees it at exit. Under daemon->state_lock, but
 * tick_ev (main only). */
struct lb_state {
    struct lb_health_stats health;      /* shown by /stats and /metrics */
    struct bal_member *decide_members;  /* scratch of the decision */
    struct lb_server **decide_servers;
    size_t decide_cap;
    struct event *tick_ev;              /* heartbeat expiry, slow start */
    struct lb_state_data data;          /* main's: the data path's calls */
};

/* Room for a decision over n servers (state_lock held). The scratch grows
 * only at start and at reloads, before anything is committed, so a
 * decision on a health verdict or an operator action never allocates. */
static int
lb_decide_reserve(struct lb_daemon *d, size_t n)
{
    struct bal_member *m;
    struct lb_server **s;

    if (n <= d->state->decide_cap)
        return 0;
    m = realloc(d->state->decide_members, n * sizeof(*m));
    if (m == NULL)
        return -1;
    d->state->decide_members = m;
    s = realloc(d->state->decide_servers, n * sizeof(*s));
    if (s == NULL)
        return -1;
    d->state->decide_servers = s;
    d->state->decide_cap = n;
    return 0;
}

/* A heartbeat's change, as its log line says it. */
/* A side part of a backend (state_types.h), allocated at its first use:
 * NULL when out of memory. */
static void *
lb_backend_part(void *part, size_t size)
{
    return part != NULL ? part : calloc(1, size);
}

static const char *
lb_note(const char *note)
{
    return note != NULL ? note : "";
}

static const char *
lb_beat_reason(const struct lb_server *srv, char *buf, size_t len)
{
    const struct lb_backend *b = srv->b;

    if (b->is_beat_expired)
        snprintf(buf, len, "heartbeat expired %.1f s ago",
                 (double)(lb_mono_ms() - b->beat_at_ms) / 1000.0);
    else if (lb_note(b->beat_note)[0] != '\0')
        snprintf(buf, len, "heartbeat %s: %s", bal_beat_name(b->beat), b->beat_note);
    else
        snprintf(buf, len, "heartbeat: %s", bal_beat_name(b->beat));
    return buf;
}

/* An agent's verdict, as its log line says it: "agent: drain", "agent:
 * up 50%", "agent: down (disk full)". */
static const char *
lb_agent_reason(const struct lb_server *srv, char *buf, size_t len)
{
    const struct lb_backend *b = srv->b;
    char share[16] = "";

    if (b->agent.has_share)
        snprintf(share, sizeof(share), " %u%%", b->agent.share / (BAL_SHARE_FULL / 100));
    snprintf(buf, len, "agent: %s%s%s%s%s", bal_agent_name(b->agent.state), share,
             lb_note(b->agent_note)[0] != '\0' ? " (" : "", lb_note(b->agent_note),
             lb_note(b->agent_note)[0] != '\0' ? ")" : "");
    return buf;
}

static const char *
lb_why_text(const struct bal_member *m, const struct lb_server *srv, const char *cause_reason,
            char *buf, size_t len)
{
    switch (m->why) {
    case BAL_WHY_BEAT:
        return lb_beat_reason(srv, buf, len);
    case BAL_WHY_AGENT:
        return lb_agent_reason(srv, buf, len);
    case BAL_WHY_RELOAD:
        return "reload";
    case BAL_WHY_GUARD_HOLD:
        return "guard: held in rotation by min_servers";
    case BAL_WHY_GUARD_RELEASE: {
        /* out because the guard let go: say why it was failing */
        char eject[128];

        if (srv->b->is_ejected)
            lb_server_eject_reason(srv, eject, sizeof(eject));
        snprintf(buf, len, "guard released: %s",
                 srv->b->is_ejected ? eject
                 : srv->b->last_check != NULL ? srv->b->last_check->detail : "failing");
        return buf;
    }
    default:
        return cause_reason;
    }
}

/* Why a server is warning: the probe's answer or the heartbeat's word. */
static const char *
lb_warning_reason(const struct lb_server *srv, const char *cause_reason)
{
    const struct lb_backend *b = srv->b;

    if (b->health.state == BAL_HEALTH_WARNING && b->last_check != NULL)
        return b->last_check->detail;
    if (b->beat == BAL_BEAT_WARN)
        return lb_note(b->beat_note)[0] != '\0' ? b->beat_note : "heartbeat: warn";
    return cause_reason;
}

/* Carries out the decision for one server. in_count is the pool's count
 * of servers in rotation as the moves are applied one by one. */
static void
lb_decide_apply(struct lb_daemon *d, struct lb_server *srv, const struct bal_member *m,
                const char *cause_reason, double detection_ms, size_t in_after,
                size_t *in_count)
{
    struct lb_backend *b = srv->b;
    const struct conf_pool *pc = srv->pool->conf;
    char qbuf[HC_DETAIL_MAX * 2], why[HC_DETAIL_MAX + 64], beat[LB_BEAT_NOTE_MAX + 32];

    /* a heartbeat's decision has no one reason: each server has its own */
    if (cause_reason == NULL)
        cause_reason = lb_beat_reason(srv, beat, sizeof(beat));
    if (m->guard_held)
        lb_log(CONF_LOG_WARN, "guard_hold", "pool=%s server=%s in_rotation=%zu min_servers=%u",
               pc->name, srv->conf->name, in_after,
               bal_guard_floor(pc->min_servers.value, pc->min_servers.is_percent, pc->nservers));
    else if (m->guard_released)
        lb_log(CONF_LOG_INFO, "guard_release", "pool=%s server=%s health=%s",
               pc->name, srv->conf->name, bal_health_state_name(b->health.state));
    b->is_guarded = m->is_guarded;
    b->is_decided = true;
    b->is_beat_news = false;
    b->is_outlier_news = false;
    b->ramp_since_ms = m->ramp_since_ms;

    /* The share first: a server coming in is picked at its ramp's share
     * from its first pick. Out of rotation it keeps its last one (nobody
     * picks it). */
    if (m->in_rotation &&
        atomic_load_explicit(&b->live.share, memory_order_relaxed) != m->share)
        bal_server_set_share(srv->pool->bal, srv->index, m->share);
    if (m->in_rotation != m->was_in_rotation)
        bal_server_set_in_rotation(srv->pool->bal, srv->index, m->in_rotation);
    atomic_store_explicit(&b->is_failing, !m->in_rotation &&
                          (b->health.state == BAL_HEALTH_DOWN || m->beat == BAL_BEAT_FAIL ||
                           m->agent.state == BAL_AGENT_DOWN || m->is_ejected),
                          memory_order_relaxed);
    if (m->is_warning != b->is_warning) {
        b->is_warning = m->is_warning;
        if (m->is_warning)
            lb_log(CONF_LOG_WARN, "server_warning", "pool=%s server=%s addr=%s reason=%s "
                   "warn_weight=%u%%", pc->name, srv->conf->name, srv->conf->addr.text,
                   lb_log_quote(qbuf, sizeof(qbuf), lb_warning_reason(srv, cause_reason)),
                   pc->warn_weight.value);
        else if (m->in_rotation)
            lb_log(CONF_LOG_INFO, "server_warning_clear", "pool=%s server=%s addr=%s reason=%s",
                   pc->name, srv->conf->name, srv->conf->addr.text,
                   lb_log_quote(qbuf, sizeof(qbuf), cause_reason));
    }
    if (m->drain_clear)
        atomic_store(&b->drain_deadline_ms, 0);
    if (m->drain_restart) {
        atomic_store(&b->drain_deadline_ms, bal_drain_deadline(lb_mono_ms(), m->drain_ms));
        /* workers scan their sessions on a change only */
        if (atomic_load(&b->live.active_connections) > 0)
            d->state->data.scan(d);
    }
    if (m->why == BAL_WHY_NONE || m->why == BAL_WHY_PLACED)
        return;
    b->last_change = lb_wall_now();
    if (m->why == BAL_WHY_REMOVED) {
        lb_log(CONF_LOG_INFO, "server_removed", "pool=%s server=%s addr=%s active=%u drain_timeout_ms=%llu",
               pc->name, srv->conf->name, srv->conf->addr.text,
               atomic_load(&b->live.active_connections), (unsigned long long)m->drain_ms);
        return;
    }
    *in_count += m->in_rotation ? 1 : (size_t)-1;
    /* An operator's drain or disable is maintenance, not a failure: its
     * own event, at info, so that what pages on server_down (warn) does
     * not page for it. So is an agent's drain, maint or 0%; its down is a
     * failure. */
    bool is_maintenance = m->why == BAL_WHY_ADMIN ||
                          (m->why == BAL_WHY_AGENT && bal_agent_is_out(&m->agent));

    lb_log(m->in_rotation || is_maintenance ? CONF_LOG_INFO : CONF_LOG_WARN,
           m->in_rotation ? "server_up" : is_maintenance ? "server_maintenance" : "server_down",
           "pool=%s server=%s addr=%s reason=%s successes=%u failures=%u in_rotation=%zu/%zu detection_ms=%.0f",
           pc->name, srv->conf->name, srv->conf->addr.text,
           lb_log_quote(qbuf, sizeof(qbuf), lb_why_text(m, srv, cause_reason, why, sizeof(why))),
           b->health.consecutive_successes, b->health.consecutive_failures, *in_count,
           pc->nservers, m->why == BAL_WHY_HEALTH || m->why == BAL_WHY_ADMIN ? detection_ms : 0);
}

/* One decision over the n servers in d->state->decide_servers (a pool, and at a
 * reload the servers it lost), and what it changes. cause is the index of
 * the server whose input changed (BAL_CAUSE_BUILD: none); cause_reason the
 * log text of that change. */
static size_t
lb_decide(struct lb_daemon *d, const struct conf_pool *pc, size_t n, enum bal_cause kind,
          size_t cause, const char *cause_reason, double detection_ms, bool warm_hold)
{
    struct bal_member *m = d->state->decide_members;
    uint32_t floor = pc != NULL ? bal_guard_floor(pc->min_servers.value,
                                                  pc->min_servers.is_percent, pc->nservers)
                                : 0;
    size_t in_after, in_count = 0, held = 0;
    uint64_t now = lb_mono_ms();

    for (size_t i = 0; i < n; i++) {
        const struct lb_server *srv = d->state->decide_servers[i];
        const struct lb_backend *b = srv->b;
        const struct conf_pool *spc = srv->pool->conf;

        m[i] = (struct bal_member){
            .health = b->health.state,
            .op = b->op,
            .is_removed = b->is_removed,
            .is_new = !b->is_decided,
            .was_in_rotation = atomic_load_explicit(&b->live.in_rotation, memory_order_relaxed),
            .was_guarded = b->is_guarded,
            /* the guard holds the latest failures first, whichever
             * input failed */
            .down_since_ms = b->is_ejected && b->ejected_at_ms > b->down_since_ms
                                 ? b->ejected_at_ms : b->down_since_ms,
            .drain_timeout_ms = spc->drain_timeout_ms,
            .may_warm_hold = warm_hold && b->is_removed,
            .beat = spc->heartbeat_ttl_ms > 0 ? b->beat : BAL_BEAT_OFF,
            .warn_share = spc->warn_weight.value * (BAL_SHARE_FULL / 100),
            .slow_start_ms = spc->slow_start_ms,
            .now_ms = now,
            .ramp_since_ms = b->ramp_since_ms,
            .is_cause = (kind == BAL_CAUSE_BEAT && b->is_beat_news) ||
                        (kind == BAL_CAUSE_OUTLIER && b->is_outlier_news),
            .agent = lb_server_agent(srv),
            .is_ejected = b->is_ejected,
        };
        in_count += m[i].was_in_rotation && !b->is_removed;
    }
    in_after = bal_rotation_decide(m, n, floor, kind, cause);
    for (size_t i = 0; i < n; i++) {
        lb_decide_apply(d, d->state->decide_servers[i], &m[i], cause_reason, detection_ms, in_after,
                        &in_count);
        held += m[i].is_warm_held;
    }
    /* A server back in rotation brings free slots: they go to the clients
     * already queued for one (a no-op when nobody waits). */
    if (pc != NULL && n > 0)
        d->state->data.kick(&d->state->decide_servers[0]->pool->shared->queue);
    return held;
}

void
lb_pool_decide(struct lb_daemon *d, struct lb_pool *pool, enum bal_cause kind,
               const struct lb_server *cause, const char *reason, double detection_ms)
{
    size_t n = pool->conf->nservers;

    /* reserved for this pool's size when its generation was placed */
    for (size_t i = 0; i < n; i++)
        d->state->decide_servers[i] = &pool->servers[i];
    lb_decide(d, pool->conf, n, kind, cause != NULL ? cause->index : 0, reason, detection_ms,
              false);
    if (d->state->data.decided != NULL)
        d->state->data.decided(d);
}

/* A server of old that generation g does not have. */
static bool
lb_gen_lost(const struct lb_gen *g, const struct lb_server *srv)
{
    uint32_t id = srv->b->id;

    return id >= g->nby_id || g->by_id[id] == NULL || g->by_id[id]->b != srv->b;
}

/* The servers of old's pool named `name` that g lost, appended to the
 * decision's servers from index n; returns the new count. */
static size_t
lb_gen_add_lost(struct lb_daemon *d, const struct lb_gen *g, const struct lb_gen *old,
                const char *name, size_t n)
{
    for (size_t i = 0; old != NULL && i < old->conf->npools; i++) {
        const struct lb_pool *op = &old->pools[i];

        if (strcmp(op->conf->name, name) != 0)
            continue;
        for (size_t k = 0; k < op->conf->nservers; k++) {
            if (lb_gen_lost(g, &op->servers[k])) {
                op->servers[k].b->is_removed = true;
                d->state->decide_servers[n++] = &op->servers[k];
            }
        }
    }
    return n;
}

int
lb_gen_decide_reserve(struct lb_daemon *d, const struct lb_gen *g, const struct lb_gen *old)
{
    size_t need = 0;

    /* the largest pool, plus every server a reload could remove from it */
    for (size_t i = 0; i < g->conf->npools; i++)
        need = g->conf->pools[i].nservers > need ? g->conf->pools[i].nservers : need;
    return lb_decide_reserve(d, need + (old != NULL ? old->nservers : 0));
}

size_t
lb_gen_decide(struct lb_daemon *d, struct lb_gen *g, const struct lb_gen *old, bool warm_hold,
              size_t *warm_held)
{
    size_t removed = 0;

    *warm_held = 0;
    for (size_t i = 0; i < g->conf->npools; i++) {
        struct lb_pool *p = &g->pools[i];
        size_t n = p->conf->nservers;

        for (size_t k = 0; k < n; k++)
            d->state->decide_servers[k] = &p->servers[k];
        n = lb_gen_add_lost(d, g, old, p->conf->name, n);
        removed += n - p->conf->nservers;
        *warm_held += lb_decide(d, p->conf, n, BAL_CAUSE_BUILD, 0, "reload", 0, warm_hold);
    }
    /* Pools the new config no longer has: all their servers are lost. */
    for (size_t i = 0; old != NULL && i < old->conf->npools; i++) {
        const char *name = old->pools[i].conf->name;
        bool kept = false;
        size_t n;

        for (size_t k = 0; k < g->conf->npools && !kept; k++)
            kept = strcmp(g->conf->pools[k].name, name) == 0;
        if (kept)
            continue;
        n = lb_gen_add_lost(d, g, old, name, 0);
        removed += n;
        lb_decide(d, NULL, n, BAL_CAUSE_BUILD, 0, "reload", 0, false);
    }
    if (d->state->data.decided != NULL)
        d->state->data.decided(d);
    return removed;
}

bool
lb_gen_is_warming(const struct lb_gen *g)
{
    for (size_t i = 0; i < g->nservers; i++) {
        const struct lb_backend *b = g->servers[i]->b;

        if (bal_is_warming(b->health.state, &b->op))
            return true;
    }
    return false;
}

void
lb_server_set_admin(struct lb_daemon *d, struct lb_server *srv, enum bal_admin admin)
{
    static const char *const events[] = {
        [BAL_ADMIN_NONE] = "server_enable",
        [BAL_ADMIN_DRAIN] = "server_drain",
        [BAL_ADMIN_DISABLE] = "server_disable",
    };
    static const char *const reasons[] = {
        [BAL_ADMIN_NONE] = "operator: enable",
        [BAL_ADMIN_DRAIN] = "operator: drain",
        [BAL_ADMIN_DISABLE] = "operator: disable",
    };

    if (srv->b->op.admin == admin)
        return;
    srv->b->op.admin = admin;
    lb_log(CONF_LOG_INFO, events[admin], "pool=%s server=%s health=%s",
           srv->pool->conf->name, srv->conf->name,
           bal_health_state_name(srv->b->health.state));
    lb_pool_decide(d, srv->pool, BAL_CAUSE_ADMIN, srv, reasons[admin], 0);
}

void
lb_server_set_weight(struct lb_daemon *d, struct lb_server *srv, uint32_t weight)
{
    char reason[32];

    if (srv->b->op.weight == weight)
        return;
    srv->b->op.weight = weight;
    snprintf(reason, sizeof(reason), "operator: weight %u", weight);
    lb_pool_decide(d, srv->pool, BAL_CAUSE_ADMIN, srv, reason, 0);
}

void
lb_server_mark_deleted(struct lb_server *srv)
{
    srv->b->op.is_api_removed = true;
}

void
lb_pool_decide_deleted(struct lb_daemon *d, struct lb_pool *pool, struct lb_server *first,
                       const char *reason)
{
    lb_pool_decide(d, pool, BAL_CAUSE_ADMIN, first, reason, 0);
}

void
lb_server_delete(struct lb_daemon *d, struct lb_server *srv, const char *reason)
{
    if (srv->b->op.is_api_removed)
        return;
    srv->b->op.is_api_removed = true;
    lb_pool_decide(d, srv->pool, BAL_CAUSE_ADMIN, srv, reason, 0);
}

void
lb_server_apply_check(struct lb_daemon *d, struct lb_server *srv,
                      const struct hc_result *r)
{
    struct lb_health_stats *st = &d->state->health;
    enum bal_health_change change;
    char qbuf[HC_DETAIL_MAX * 2];
    double detection_ms;

    if (r->seq <= srv->b->last_seq)
        return;                     /* older than what is known: drop */
    srv->b->last_seq = r->seq;
    srv->b->last_check = lb_backend_part(srv->b->last_check, sizeof(*srv->b->last_check));
    if (srv->b->last_check != NULL) {
        *srv->b->last_check = (struct lb_check_info){
            .is_set = true, .passed = r->passed, .is_warning = r->is_warning,
            .duration_ms = r->duration_ms, .at = r->started_at,
        };
        memcpy(srv->b->last_check->detail, r->detail, sizeof(srv->b->last_check->detail));
    }
    srv->b->checks++;
    st->checks++;
    if (r->lag_ms > srv->b->lag_ms_max)
        srv->b->lag_ms_max = r->lag_ms;
    lb_hist_observe(&st->lag, r->lag_ms);
    lb_hist_observe(&srv->pool->shared->check_duration, r->duration_ms);
    /* Logged before the transition it may cause, which the tests read as
     * its cause (harness.transition_streak). */
    lb_log(CONF_LOG_DEBUG, "check",
           "pool=%s server=%s result=%s detail=%s duration_ms=%.1f lag_ms=%.1f",
           srv->pool->conf->name, srv->conf->name,
           !r->passed ? "failed" : r->is_warning ? "warning" : "passed",
           lb_log_quote(qbuf, sizeof(qbuf), r->detail), r->duration_ms, r->lag_ms);

    /* The first verdict of a server nobody had probed (at start, or added
     * by a reload) places it: it detects no change, and a 0 s detection
     * would pull lb_detection_seconds' quantiles down. */
    bool is_first = srv->b->health.state == BAL_HEALTH_STARTING ||
                    srv->b->health.state == BAL_HEALTH_PENDING;

    change = bal_health_apply(&srv->b->health,
                              !r->passed ? BAL_RESULT_FAIL
                              : r->is_warning ? BAL_RESULT_WARN : BAL_RESULT_PASS,
                              r->started_mono_ms);
    if (change == BAL_HEALTH_UNCHANGED)
        return;
    if (change == BAL_HEALTH_WARNED || change == BAL_HEALTH_CLEARED) {
        /* in rotation either way: only its share moves */
        lb_pool_decide(d, srv->pool, BAL_CAUSE_HEALTH, srv, r->detail, 0);
        return;
    }
    /* Detection time: from the start of the first probe of the streak to
     * now, when the verdict takes effect. */
    detection_ms = (double)(lb_mono_ms() - srv->b->health.streak_started_ms);
    srv->b->last_detection_ms = detection_ms;
    if (!is_first)
        lb_hist_observe(change == BAL_HEALTH_WENT_DOWN ? &st->detection_down
                                                       : &st->detection_up, detection_ms);
    if (change == BAL_HEALTH_WENT_DOWN)
        srv->b->down_since_ms = srv->b->health.streak_started_ms;
    lb_pool_decide(d, srv->pool, BAL_CAUSE_HEALTH, srv, r->detail, detection_ms);
}


/* ------------------------------------------------------------- agents */

struct bal_agent_verdict
lb_server_agent(const struct lb_server *srv)
{
    return srv->conf->agent_port != 0 ? srv->b->agent : (struct bal_agent_verdict){ 0 };
}

uint32_t
lb_server_cap(const struct lb_server *srv)
{
    return srv->conf->agent_port != 0 && srv->b->has_agent_maxconn ? srv->b->agent_maxconn
                                                                    : srv->conf->max_connections;
}

/* The reply's state word, as the decision's column. */
static enum bal_agent
lb_agent_state(enum hc_agent_state s, enum bal_agent last)
{
    switch (s) {
    case HC_AGENT_STATE_UP:
    case HC_AGENT_STATE_READY:
        return BAL_AGENT_UP;
    case HC_AGENT_STATE_DOWN:
        return BAL_AGENT_DOWN;
    case HC_AGENT_STATE_DRAIN:
        return BAL_AGENT_DRAIN;
    case HC_AGENT_STATE_MAINT:
        return BAL_AGENT_MAINT;
    case HC_AGENT_STATE_NONE:
        break;
    }
    return last;                        /* a reply without one keeps it */
}

void
lb_server_apply_agent(struct lb_daemon *d, struct lb_server *srv, const struct hc_result *r)
{
    struct lb_backend *b = srv->b;
    const struct hc_agent_reply *a = &r->agent;
    struct bal_agent_verdict v = b->agent;
    char qbuf[HC_DETAIL_MAX * 2], reason[HC_DETAIL_MAX + 32];
    uint32_t cap_before = lb_server_cap(srv);

    if (srv->conf->agent_port == 0 || r->seq <= b->agent_seq)
        return;                         /* an agent gone by a reload, or late */
    b->agent_seq = r->seq;
    b->agent_checks++;
    b->last_agent = lb_backend_part(b->last_agent, sizeof(*b->last_agent));
    if (b->last_agent != NULL) {
        *b->last_agent = (struct lb_check_info){
            .is_set = true, .passed = r->passed, .duration_ms = r->duration_ms,
            .at = r->started_at,
        };
        memcpy(b->last_agent->detail, r->detail, sizeof(b->last_agent->detail));
    }
    lb_log(CONF_LOG_DEBUG, "agent", "pool=%s server=%s result=%s detail=%s duration_ms=%.1f",
           srv->pool->conf->name, srv->conf->name, r->passed ? "passed" : "failed",
           lb_log_quote(qbuf, sizeof(qbuf), r->detail), r->duration_ms);
    if (!r->passed)
        return;                         /* unreachable or unreadable: as it was */
    v.state = lb_agent_state(a->state, v.state);
    if (a->has_percent) {
        v.has_share = true;
        v.share = a->percent * (BAL_SHARE_FULL / 100);
    }
    if (a->has_note && (b->agent_note = lb_backend_part(b->agent_note,
                                                         HC_AGENT_NOTE_MAX + 1)) != NULL)
        snprintf(b->agent_note, HC_AGENT_NOTE_MAX + 1, "%s", a->note);
    if (a->has_maxconn) {
        b->has_agent_maxconn = true;
        b->agent_maxconn = a->maxconn;
    }
    if (lb_server_cap(srv) != cap_before) {
        bal_server_set_cap(srv->pool->bal, srv->index, lb_server_cap(srv));
        lb_log(CONF_LOG_INFO, "server_maxconn", "pool=%s server=%s max_connections=%u "
               "reason=agent", srv->pool->conf->name, srv->conf->name, lb_server_cap(srv));
        /* a higher cap, or none, has slots for the clients queued */
        d->state->data.kick(&srv->pool->shared->queue);
    }
    if (v.state == b->agent.state && v.has_share == b->agent.has_share &&
        v.share == b->agent.share)
        return;
    b->agent = v;
    lb_pool_decide(d, srv->pool, BAL_CAUSE_AGENT, srv,
                   lb_agent_reason(srv, reason, sizeof(reason)), 0);
}

/* ---------------------------------------------------- heartbeats, time */

/* The tick's period: the resolution of heartbeat expiry (a server is out
 * at most this long after its TTL ran out) and of slow-start steps. */
#define LB_TICK_MS 100

/* Heartbeat changes decided at once per pool and tick; more wait for the
 * tick, which decides them together. */
#define LB_BEAT_DECISIONS_PER_TICK 10

/* Decides a pool on its heartbeats' news: at once for the first few
 * changes of a tick, so that a lone change takes effect before its
 * answer; past those, the tick does it, for every server whose heartbeat
 * changed meanwhile. A fleet whose agents all come back at once (10,000
 * servers, each a decision over 10,000) would otherwise cost main
 * seconds under state_lock. cause NULL: the tick. */
static void
lb_beat_decide(struct lb_daemon *d, struct lb_pool *pool, const struct lb_server *cause,
               uint64_t now)
{
    struct lb_pool_shared *sh = pool->shared;

    if (cause != NULL) {
        if (now - sh->beat_window_ms >= LB_TICK_MS) {
            sh->beat_window_ms = now;
            sh->beat_decisions = 0;
        }
        if (sh->beat_decisions >= LB_BEAT_DECISIONS_PER_TICK) {
            sh->has_beat_news = true;
            return;
        }
        sh->beat_decisions++;
    } else {
        /* the first server with news is the decision's cause */
        for (size_t k = 0; k < pool->conf->nservers && cause == NULL; k++)
            cause = pool->servers[k].b->is_beat_news ? &pool->servers[k] : NULL;
        sh->has_beat_news = false;
        if (cause == NULL)
            return;                     /* another decision took them in */
    }
    lb_pool_decide(d, pool, BAL_CAUSE_BEAT, cause, NULL, 0);
}

void
lb_server_heartbeat(struct lb_daemon *d, struct lb_server *srv, enum bal_beat status,
                    const char *note)
{
    struct lb_backend *b = srv->b;
    bool is_change = status != b->beat;

    b->beat_at_ms = lb_mono_ms();
    b->is_delete_held = false;
    b->beat_at = lb_wall_now();
    b->heartbeats++;
    b->beat = status;
    b->is_beat_expired = false;
    /* a note once kept is kept up to date, an empty one too */
    if (note[0] != '\0' || b->beat_note != NULL)
        b->beat_note = lb_backend_part(b->beat_note, LB_BEAT_NOTE_MAX);
    if (b->beat_note != NULL)
        snprintf(b->beat_note, LB_BEAT_NOTE_MAX, "%s", note);
    if (!is_change)
        return;                         /* the common case: one more pass */
    b->is_beat_news = true;
    lb_beat_decide(d, srv->pool, srv, b->beat_at_ms);
}

const char *
lb_server_health_name(const struct lb_server *srv)
{
    const struct lb_backend *b = srv->b;

    if (((srv->pool->conf->heartbeat_ttl_ms > 0 && b->beat == BAL_BEAT_FAIL) ||
         lb_server_agent(srv).state == BAL_AGENT_DOWN) &&
        bal_health_is_up(&b->health))
        return "down";
    if (b->is_warning)
        return "warning";
    return bal_health_state_name(b->health.state);
}

static void
lb_server_on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;
    uint64_t now = lb_mono_ms();

    (void)fd;
    (void)what;
    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->gen->conf->npools; i++) {
        struct lb_pool *pool = &d->gen->pools[i];
        uint64_t ttl = pool->conf->heartbeat_ttl_ms;
        bool is_news = pool->shared->has_beat_news, is_ramping = false;

        for (size_t k = 0; ttl > 0 && k < pool->conf->nservers; k++) {
            struct lb_server *srv = &pool->servers[k];
            struct lb_backend *b = srv->b;

            if (b->beat_at_ms == 0) {
                b->beat_at_ms = now;    /* first look: one TTL from now */
            } else if (b->beat != BAL_BEAT_FAIL && now - b->beat_at_ms > ttl) {
                b->beat = BAL_BEAT_FAIL;
                b->is_beat_expired = b->is_beat_news = true;
                is_news = true;
            }
        }
        /* One decision for all that expired in this tick, and the changes
         * that waited for it: when a whole fleet's agent dies, 10,000
         * decisions of 10,000 servers each would hold state_lock for
         * seconds. */
        if (is_news)
            lb_beat_decide(d, pool, NULL, now);
        for (size_t k = 0; pool->conf->slow_start_ms > 0 && k < pool->conf->nservers; k++)
            is_ramping |= pool->servers[k].b->ramp_since_ms != 0;
        if (is_ramping)
            lb_pool_decide(d, pool, BAL_CAUSE_TIME, NULL, "slow start", 0);
        lb_outlier_tick(d, pool, now);
    }
    pthread_mutex_unlock(&d->state_lock);
}

int
lb_state_init(struct lb_daemon *d, const struct lb_state_data *data)
{
    struct timeval tv = lb_tv_ms(LB_TICK_MS);

    if ((d->state = calloc(1, sizeof(*d->state))) == NULL)
        return -1;
    d->state->data = *data;
    d->state->tick_ev = event_new(d->base, -1, EV_PERSIST, lb_server_on_tick, d);
    return d->state->tick_ev != NULL && event_add(d->state->tick_ev, &tv) == 0 ? 0 : -1;
}

void
lb_state_fini(struct lb_daemon *d)
{
    struct lb_state *st = d->state;

    if (st == NULL)
        return;
    if (st->tick_ev != NULL)
        event_free(st->tick_ev);
    free(st->decide_members);
    free(st->decide_servers);
    free(st);
    d->state = NULL;
}

const struct lb_health_stats *
lb_state_health(const struct lb_daemon *d)
{
    return &d->state->health;
}
