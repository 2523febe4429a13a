/*
 * rotation.c - a pool's rotation decision: which servers serve, which are
 * held by the minimum-pool guard, at what weight, and why each one moved.
 * Pure: every input is a field of struct bal_member, every output too.
 *
 * One server, before the guard. "operator" is out when any of its
 * operator's inputs says so (bal_operator_is_out): admin drain or disable,
 * weight 0, or deleted through the API; each is kept as it was last set,
 * so the last of them to be undone brings the server back. "agent" is
 * what its agent last said (struct bal_agent_verdict): out for drain,
 * maint or 0% (bal_agent_is_out), down, or in (off: no agent or no state
 * word yet; up or ready; with any share above 0%):
 *
 *   removed  operator agent  health       heartbeat  -> in rotation
 *   yes      in       in     any          any        -> while the pool warms
 *                                                       and the caller allows
 *                                                       it (may_warm_hold):
 *                                                       as it was; then no,
 *                                                       drains
 *   yes      out      any    any          any        -> no, drains (why:
 *                                                       removed)
 *   yes      in       out    any          any        -> no, drains (why:
 *                                                       removed)
 *   no       out      any    any          any        -> no (why: admin when
 *                                                       it moved); drains, a
 *                                                       disable closes at
 *                                                       once
 *   no       in       out    any          any        -> no (why: agent when
 *                                                       it moved); drains, a
 *                                                       maint closes at once
 *   no       in       in or  pending      any        -> no: a server a reload
 *                     down                              added waits for its
 *                                                       first pass
 *   no       in       in or  down         any        -> no, unless the guard
 *                     down                              holds it
 *   no       in       in or  starting/up/ fail or    -> no, unless the guard
 *                     down   warning      expired       holds it
 *   no       in       down   starting/up/ off, pass, -> no, unless the guard
 *                            warning      warn          holds it
 *   no       in       in     starting/up/ off, pass, -> yes; warning (at
 *                            warning      warn          warn_share of its
 *                                                       weight) when the
 *                                                       health or the
 *                                                       heartbeat says
 *                                                       warning
 *
 * Outlier detection (is_ejected: ejected from live traffic, its eject time
 * not over) is one more failure beside "down" in the health column's rows:
 * an ejected server is out as one whose probe fails, and the guard may
 * hold it. Nothing in this table brings it back early; its caller clears
 * is_ejected when the eject time is over (bal_outlier.h).
 *
 * A heartbeat and an agent only ever lower: a fresh "pass", an agent's
 * "up" or "ready", never brings back a server whose probe fails (the
 * agent's "up" kept HAProxy's servers in after their L4 check failed,
 * haproxy/haproxy#1176); "up" only lifts the agent's own earlier word.
 *
 * What an operator reads (bal_state_of_agent; bal_state_of is it with no
 * agent), from the decision and the inputs:
 *   in rotation (guarded too)                     -> up
 *   out, admin disable or agent maint (whatever   -> disabled (HAProxy's
 *   else)                                            MAINT: closed)
 *   out, admin drain, weight 0, deleted, agent    -> draining (HAProxy's
 *   drain or agent 0%                                DRAIN, also for its
 *                                                    weight 0)
 *   out by health, heartbeat or agent down,       -> draining
 *   connections open
 *   out by health, heartbeat or agent down,       -> down
 *   none open
 *
 * Slow start: a server that enters rotation because of its health, an
 * operator, its heartbeat or its agent (not at start, nor by the guard)
 * ramps its share from BAL_RAMP_MIN to full, linearly over slow_start_ms;
 * the share is the ramp's times the warn share times the agent's N%.
 * BAL_CAUSE_TIME decisions move the ramps on and change nothing else.
 *
 * The guard: when fewer servers than the floor are in, failing servers
 * (operator in, agent not out, health down, heartbeat or agent "down",
 * or ejected, not removed) are held in rotation to make up the difference, the least
 * bad first:
 *   1. those already held, so that a held server is never swapped for
 *      another (no flapping at the floor);
 *   2. then those whose failure began last, so the first to fail leave
 *      first.
 * Servers taken out by an operator (drain, disable, weight 0, delete) or
 * by their agent (drain, maint, 0%), pending or removed are never held,
 * nor counted towards the floor: an operator who takes a server out means
 * it, so does a server that asks out through its agent (a deploy, a
 * maintenance), and a server that never passed has nothing to serve with.
 * An agent's "down" is a failure instead, held like a failing probe: a bug
 * in an agent that every server runs would otherwise empty the pool at
 * once, which is what the guard is for. Every call recomputes the whole pool,
 * so a recovery anywhere releases held servers as soon as the floor
 * allows.
 *
 * Warming: a reload that replaces servers adds new ones pending, and until
 * their first probes pass the pool would have none to serve with (a
 * blue/green switch would refuse every client for a probe's time). So while
 * any server of the pool is pending (under health control, first probe not
 * back, not asked out by its agent), the removed servers that were in
 * rotation, and that neither an operator nor their agent took out, stay
 * there; the caller bounds that in time through
 * may_warm_hold. Envoy warms a new cluster the same way before it takes
 * traffic.
 *
 * Why a server moved: a removed one, "removed" (none while warm-held); at a build (start or
 * reload), "reload" (or "placed" for its first decision, which is not a
 * change); the server whose input changed, that input ("health", "admin",
 * "beat", "agent" or "outlier"); any other server moves only because the guard held
 * or let go of it.
 */
#include "bal.h"
#include "lb_enum.h"

static const char *const bal_state_names[] = {
    [BAL_STATE_UP] = "up",
    [BAL_STATE_DRAINING] = "draining",
    [BAL_STATE_DOWN] = "down",
    [BAL_STATE_DISABLED] = "disabled",
};

static const char *const bal_admin_names[] = {
    [BAL_ADMIN_NONE] = "none",
    [BAL_ADMIN_DRAIN] = "drain",
    [BAL_ADMIN_DISABLE] = "disable",
};

static const char *const bal_beat_names[] = {
    [BAL_BEAT_OFF] = "off",
    [BAL_BEAT_PASS] = "pass",
    [BAL_BEAT_WARN] = "warn",
    [BAL_BEAT_FAIL] = "fail",
};

static const char *const bal_agent_names[] = {
    [BAL_AGENT_OFF] = "off",
    [BAL_AGENT_UP] = "up",
    [BAL_AGENT_DOWN] = "down",
    [BAL_AGENT_DRAIN] = "drain",
    [BAL_AGENT_MAINT] = "maint",
};

LB_ENUM_NAME(bal_beat_name, enum bal_beat, bal_beat_names, "unknown")
LB_ENUM_NAME(bal_agent_name, enum bal_agent, bal_agent_names, "unknown")

uint32_t
bal_guard_floor(uint32_t min_servers, bool is_percent, size_t nservers)
{
    uint64_t floor = min_servers;

    if (is_percent)         /* rounded up: 50% of 3 servers is 2 */
        floor = ((uint64_t)min_servers * nservers + 99) / 100;
    return floor > nservers ? (uint32_t)nservers : (uint32_t)floor;
}

/* A ramp's first share: small, not 0, so that a slow start begins at once. */
#define BAL_RAMP_MIN (BAL_SHARE_FULL / 100)

static bool
bal_member_is_healthy(const struct bal_member *m)
{
    return (m->health == BAL_HEALTH_STARTING || m->health == BAL_HEALTH_UP ||
            m->health == BAL_HEALTH_WARNING) && m->beat != BAL_BEAT_FAIL &&
           m->agent.state != BAL_AGENT_DOWN && !m->is_ejected;
}

bool
bal_operator_is_out(const struct bal_operator *op)
{
    return op->admin != BAL_ADMIN_NONE || op->weight == 0 || op->is_api_removed;
}

bool
bal_agent_is_out(const struct bal_agent_verdict *a)
{
    return a->state == BAL_AGENT_DRAIN || a->state == BAL_AGENT_MAINT ||
           (a->has_share && a->share == 0);
}

/* Out by a decision, the operator's or the server's own through its agent,
 * rather than by a failure. */
static bool
bal_member_is_asked_out(const struct bal_member *m)
{
    return bal_operator_is_out(&m->op) || bal_agent_is_out(&m->agent);
}

/* Under health control: neither removed, nor asked out, nor waiting for
 * its first probe. Only these count for, or are held by, the guard. */
static bool
bal_member_is_eligible(const struct bal_member *m)
{
    return !m->is_removed && !bal_member_is_asked_out(m) && m->health != BAL_HEALTH_PENDING;
}

/* true when a should be held before b */
static bool
bal_guard_prefer(const struct bal_member *a, const struct bal_member *b)
{
    if (a->was_guarded != b->was_guarded)
        return a->was_guarded;
    return a->down_since_ms > b->down_since_ms;
}

/* Holds up to `need` failing eligible servers; n is one pool, so a
 * selection by repeated scans is plenty. */
static void
bal_guard_hold(struct bal_member *m, size_t n, size_t need)
{
    while (need > 0) {
        struct bal_member *best = NULL;

        for (size_t i = 0; i < n; i++) {
            struct bal_member *c = &m[i];

            if (c->in_rotation || !bal_member_is_eligible(c))
                continue;
            if (best == NULL || bal_guard_prefer(c, best))
                best = c;
        }
        if (best == NULL)
            return;             /* fewer candidates than the floor needs */
        best->in_rotation = true;
        best->is_guarded = true;
        need--;
    }
}

bool
bal_is_warming(enum bal_health_state health, const struct bal_operator *op)
{
    return health == BAL_HEALTH_PENDING && !bal_operator_is_out(op);
}

static enum bal_why
bal_member_why(const struct bal_member *m, bool is_cause, enum bal_cause kind)
{
    if (m->is_warm_held)
        return BAL_WHY_NONE;
    if (m->is_removed)
        return BAL_WHY_REMOVED;
    if (m->in_rotation == m->was_in_rotation)
        return BAL_WHY_NONE;
    if (m->is_new)
        return BAL_WHY_PLACED;
    if (kind == BAL_CAUSE_BUILD)
        return BAL_WHY_RELOAD;
    if (is_cause)
        return kind == BAL_CAUSE_HEALTH ? BAL_WHY_HEALTH
             : kind == BAL_CAUSE_ADMIN ? BAL_WHY_ADMIN
             : kind == BAL_CAUSE_AGENT ? BAL_WHY_AGENT
             : kind == BAL_CAUSE_OUTLIER ? BAL_WHY_OUTLIER : BAL_WHY_BEAT;
    return m->in_rotation ? BAL_WHY_GUARD_HOLD : BAL_WHY_GUARD_RELEASE;
}

/* The share of its weight a server in rotation gets: the warn share while
 * warning, times its agent's N% (held or warm-held too: it is the
 * server's word on what it can take), times where its slow start is.
 * Moves ramp_since_ms: set when the server enters rotation by its own
 * inputs, cleared at the ramp's end or out of rotation. */
static uint32_t
bal_member_share(struct bal_member *m)
{
    uint64_t base = m->is_warning ? m->warn_share : BAL_SHARE_FULL, elapsed, ramp;

    if (m->agent.has_share)
        base = base * (m->agent.share < BAL_SHARE_FULL ? m->agent.share : BAL_SHARE_FULL) /
               BAL_SHARE_FULL;

    if (!m->in_rotation || m->slow_start_ms == 0) {
        m->ramp_since_ms = 0;
        return m->in_rotation ? (uint32_t)(base > 0 ? base : 1) : 0;
    }
    if (m->why == BAL_WHY_HEALTH || m->why == BAL_WHY_ADMIN || m->why == BAL_WHY_BEAT ||
        m->why == BAL_WHY_AGENT || m->why == BAL_WHY_OUTLIER)
        m->ramp_since_ms = m->now_ms > 0 ? m->now_ms : 1;
    if (m->ramp_since_ms == 0)
        return (uint32_t)(base > 0 ? base : 1);
    elapsed = m->now_ms > m->ramp_since_ms ? m->now_ms - m->ramp_since_ms : 0;
    if (elapsed >= m->slow_start_ms) {
        m->ramp_since_ms = 0;           /* done */
        return (uint32_t)(base > 0 ? base : 1);
    }
    ramp = BAL_SHARE_FULL * elapsed / m->slow_start_ms;
    if (ramp < BAL_RAMP_MIN)
        ramp = BAL_RAMP_MIN;
    base = base * ramp / BAL_SHARE_FULL;
    return (uint32_t)(base > 0 ? base : 1);
}

size_t
bal_rotation_decide(struct bal_member *m, size_t n, uint32_t floor,
                    enum bal_cause kind, size_t cause)
{
    size_t in = 0;
    bool is_warming = false;

    /* a pending server its agent asks out will not serve: no reason to
     * keep the pool warming for it */
    for (size_t i = 0; i < n && !is_warming; i++)
        is_warming = !m[i].is_removed && bal_is_warming(m[i].health, &m[i].op) &&
                     !bal_agent_is_out(&m[i].agent);
    for (size_t i = 0; i < n; i++) {
        m[i].in_rotation = bal_member_is_eligible(&m[i]) && bal_member_is_healthy(&m[i]);
        m[i].is_guarded = false;
        in += m[i].in_rotation;
    }
    if (floor > in) {
        bal_guard_hold(m, n, floor - in);
        in = 0;
        for (size_t i = 0; i < n; i++)
            in += m[i].in_rotation;
    }
    /* After the guard: warm-held servers are not the pool's own, they
     * neither count for its floor nor take a held server's place. */
    for (size_t i = 0; i < n; i++) {
        struct bal_member *s = &m[i];

        s->is_warm_held = is_warming && s->is_removed && s->may_warm_hold &&
                          s->was_in_rotation && !bal_member_is_asked_out(s);
        s->in_rotation |= s->is_warm_held;
        in += s->is_warm_held;
    }

    for (size_t i = 0; i < n; i++) {
        struct bal_member *s = &m[i];
        bool is_cause = kind != BAL_CAUSE_BUILD && kind != BAL_CAUSE_TIME &&
                        (i == cause || s->is_cause);

        s->why = bal_member_why(s, is_cause, kind);
        s->is_warning = s->in_rotation && !s->is_guarded && !s->is_warm_held &&
                        (s->health == BAL_HEALTH_WARNING || s->beat == BAL_BEAT_WARN);
        s->share = bal_member_share(s);
        /* A removed server's guard ends with it, silently. */
        s->guard_held = s->is_guarded && !s->was_guarded;
        s->guard_released = s->was_guarded && !s->is_guarded && !s->is_removed;
        /* Out of rotation: its connections drain (disable, an agent's
         * maint: closed at once). An operator's disable, or an agent's
         * maint, of a server already out closes them too. */
        s->drain_restart = (s->is_removed && !s->is_warm_held) ||
                           (!s->in_rotation && s->why != BAL_WHY_NONE &&
                            s->why != BAL_WHY_PLACED) ||
                           (!s->in_rotation && is_cause && kind == BAL_CAUSE_ADMIN &&
                            s->op.admin == BAL_ADMIN_DISABLE) ||
                           (!s->in_rotation && is_cause && kind == BAL_CAUSE_AGENT &&
                            s->agent.state == BAL_AGENT_MAINT);
        s->drain_ms = !s->is_removed && (s->op.admin == BAL_ADMIN_DISABLE ||
                                         s->agent.state == BAL_AGENT_MAINT)
                          ? 0 : s->drain_timeout_ms;
        s->drain_clear = s->in_rotation && !s->was_in_rotation;
    }
    return in;
}

enum bal_state
bal_state_of_agent(bool in_rotation, const struct bal_operator *op,
                   const struct bal_agent_verdict *agent, uint32_t active)
{
    if (in_rotation)
        return BAL_STATE_UP;
    /* The operator's states are the ones the actions lead to, as
     * HAProxy's MAINT and DRAIN are: disabled also for the milliseconds
     * its connections take to close, draining also once the last one
     * ended (the server takes none until enabled, given a weight or
     * gone). Disable wins: its connections are closed, not drained. An
     * agent's maint and drain read the same, for the same reasons: no new
     * state name for what closes or drains alike. */
    if (op->admin == BAL_ADMIN_DISABLE || agent->state == BAL_AGENT_MAINT)
        return BAL_STATE_DISABLED;
    if (bal_operator_is_out(op) || bal_agent_is_out(agent) || active > 0)
        return BAL_STATE_DRAINING;
    return BAL_STATE_DOWN;
}

enum bal_state
bal_state_of(bool in_rotation, const struct bal_operator *op, uint32_t active)
{
    static const struct bal_agent_verdict no_agent = { .state = BAL_AGENT_OFF };

    return bal_state_of_agent(in_rotation, op, &no_agent, active);
}

LB_ENUM_NAME(bal_state_name, enum bal_state, bal_state_names, "unknown")
LB_ENUM_NAME(bal_admin_name, enum bal_admin, bal_admin_names, "unknown")

uint64_t
bal_drain_deadline(uint64_t now_ms, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms + timeout_ms;

    return deadline == 0 ? 1 : deadline;
}
