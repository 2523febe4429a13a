/* Tests balancer/rotation.c: one server's truth table (its agent's and
 * outlier detection's columns included), the minimum-pool guard over a pool (with agents that fail or
 * ask out), the floor, the operator's state, the drain deadline, the share
 * (warn, agent, slow start). */
#include <stdint.h>

#include "bal.h"
#include "check.h"

#define DRAIN_MS 5000u          /* every pool's drain_timeout here */
#define WEIGHT 7u

/* ------------------------------------------------ one server's truth table
 *
 * Every combination of one server's inputs, decided in a pool of two with
 * floor 0 (the guard never bites) beside a healthy bystander, against
 * expected outputs read from the rule tables below: first matching rule
 * wins, a rule field of 0 matches any value, otherwise it is the set of
 * values it matches (H(), A(), C(), NO, YES). The rules are written from
 * the contract (bal.h, the comment at the top of rotation.c), not from
 * calling the code.
 */
enum cause_case {
    CC_BUILD = 0,               /* a generation was built */
    CC_HEALTH_SELF,             /* this server's health verdict */
    CC_ADMIN_SELF,              /* an operator acted on this server */
    CC_HEALTH_OTHER,            /* the other server's health verdict */
    CC_BEAT_SELF,               /* this server's heartbeat changed */
    CC_AGENT_SELF,              /* this server's agent said something new */
    CC_OUTLIER_SELF,            /* this server was ejected, or is back */
    CC_COUNT
};

static const char *const cause_names[] = { "build", "health-self", "admin-self",
                                           "health-other", "beat-self", "agent-self",
                                           "outlier-self" };
static const char *const beat_names[] = { "off", "pass", "warn", "fail" };

/* The agent's N%: none given, 50%, 0%. */
enum agent_share_case {
    AS_NONE = 0,
    AS_HALF,
    AS_ZERO,
    AS_COUNT
};

static const char *const agent_share_names[] = { "none", "50%", "0%" };

#define WARN_SHARE 250u

struct combo {
    enum bal_health_state health;
    enum bal_admin admin;
    bool is_zero_weight, is_api_removed;    /* the operator's other inputs */
    bool is_removed, is_new, was_in, was_guarded;
    enum cause_case cause;
    enum bal_beat beat;
    enum bal_agent agent;
    enum agent_share_case agent_share;
    bool is_ejected;            /* by outlier detection */
    bool in;                    /* expected in_rotation, once known */
};

#define H(s) (1u << (s))
#define A(a) (1u << (a))
#define C(c) (1u << (c))
#define NO (1u << 0)
#define YES (1u << 1)

struct rule {
    unsigned health, admin, is_zero_weight, is_api_removed, is_removed, is_new, was_in,
             was_guarded, cause, in, beat, agent, agent_share, is_ejected;
    long long out;
};
#define B(b) (1u << (b))
#define G(g) (1u << (g))        /* agent */
#define AS(a) (1u << (a))       /* agent_share */

/* In rotation (floor 0: nobody is held). */
static const struct rule in_rules[] = {
    { .is_removed = YES, .out = 0 },                            /* drains */
    { .admin = A(BAL_ADMIN_DRAIN) | A(BAL_ADMIN_DISABLE), .out = 0 },
    { .is_zero_weight = YES, .out = 0 },                        /* drains */
    { .is_api_removed = YES, .out = 0 },                        /* deleted */
    { .agent = G(BAL_AGENT_DRAIN) | G(BAL_AGENT_MAINT), .out = 0 }, /* asks out */
    { .agent_share = AS(AS_ZERO), .out = 0 },                   /* as weight 0 */
    { .health = H(BAL_HEALTH_PENDING), .out = 0 },              /* no pass yet */
    { .health = H(BAL_HEALTH_DOWN), .out = 0 },                 /* whatever the
                                                                   agent says:
                                                                   haproxy#1176 */
    { .beat = B(BAL_BEAT_FAIL), .out = 0 },                     /* only lowers */
    { .agent = G(BAL_AGENT_DOWN), .out = 0 },                   /* only lowers */
    { .is_ejected = YES, .out = 0 },                            /* whatever the
                                                                   probe says */
    { .health = H(BAL_HEALTH_STARTING) | H(BAL_HEALTH_UP) | H(BAL_HEALTH_WARNING), .out = 1 },
};

/* Floor 0: never held, so never a hold edge. */
static const struct rule guarded_rules[] = { { .out = 0 } };
static const struct rule held_rules[] = { { .out = 0 } };

/* The guard let go: it held the server before and no longer does. A
 * removed server's guard ends with it, silently. */
static const struct rule released_rules[] = {
    { .is_removed = YES, .out = 0 },
    { .was_guarded = YES, .out = 1 },
    { .out = 0 },
};

static const struct rule why_rules[] = {
    { .is_removed = YES, .out = BAL_WHY_REMOVED },
    { .was_in = YES, .in = YES, .out = BAL_WHY_NONE },          /* did not move */
    { .was_in = NO, .in = NO, .out = BAL_WHY_NONE },
    { .is_new = YES, .out = BAL_WHY_PLACED },                   /* not a change */
    { .cause = C(CC_BUILD), .out = BAL_WHY_RELOAD },
    { .cause = C(CC_HEALTH_SELF), .out = BAL_WHY_HEALTH },
    { .cause = C(CC_ADMIN_SELF), .out = BAL_WHY_ADMIN },
    { .cause = C(CC_BEAT_SELF), .out = BAL_WHY_BEAT },
    { .cause = C(CC_AGENT_SELF), .out = BAL_WHY_AGENT },
    { .cause = C(CC_OUTLIER_SELF), .out = BAL_WHY_OUTLIER },
    /* another server's change moves this one only through the guard */
    { .cause = C(CC_HEALTH_OTHER), .in = YES, .out = BAL_WHY_GUARD_HOLD },
    { .cause = C(CC_HEALTH_OTHER), .in = NO, .out = BAL_WHY_GUARD_RELEASE },
};

/* Its connections are to be closed drain_ms from now: removed; left
 * rotation (a new server's first place is no leaving); an operator's
 * disable or an agent's maint, even of a server already out. */
static const struct rule restart_rules[] = {
    { .is_removed = YES, .out = 1 },
    { .in = YES, .out = 0 },
    { .was_in = YES, .is_new = NO, .out = 1 },
    { .cause = C(CC_ADMIN_SELF), .admin = A(BAL_ADMIN_DISABLE), .out = 1 },
    { .cause = C(CC_AGENT_SELF), .agent = G(BAL_AGENT_MAINT), .out = 1 },
    { .out = 0 },
};

/* Came back into rotation: nothing is to be closed. */
static const struct rule clear_rules[] = {
    { .in = YES, .was_in = NO, .out = 1 },
    { .out = 0 },
};

/* Disable and an agent's maint close at once; a removed server drains
 * whatever its admin or agent. */
static const struct rule drain_ms_rules[] = {
    { .is_removed = NO, .admin = A(BAL_ADMIN_DISABLE), .out = 0 },
    { .is_removed = NO, .agent = G(BAL_AGENT_MAINT), .out = 0 },
    { .out = DRAIN_MS },
};

/* Warning, in rotation: the probe's or the heartbeat's word. */
static const struct rule warning_rules[] = {
    { .in = NO, .out = 0 },
    { .health = H(BAL_HEALTH_WARNING), .out = 1 },
    { .beat = B(BAL_BEAT_WARN), .out = 1 },
    { .out = 0 },
};

/* No slow start here: the share is the warn share while warning, times
 * the agent's N% (in rotation, never 0%). */
static const struct rule share_rules[] = {
    { .in = NO, .out = 0 },
    { .health = H(BAL_HEALTH_WARNING), .agent_share = AS(AS_HALF), .out = WARN_SHARE / 2 },
    { .health = H(BAL_HEALTH_WARNING), .out = WARN_SHARE },
    { .beat = B(BAL_BEAT_WARN), .agent_share = AS(AS_HALF), .out = WARN_SHARE / 2 },
    { .beat = B(BAL_BEAT_WARN), .out = WARN_SHARE },
    { .agent_share = AS(AS_HALF), .out = BAL_SHARE_FULL / 2 },
    { .out = BAL_SHARE_FULL },
};

static bool
field_matches(unsigned set, unsigned value)
{
    return set == 0 || (set & (1u << value)) != 0;
}

static bool
rule_matches(const struct rule *r, const struct combo *c)
{
    return field_matches(r->health, c->health) && field_matches(r->admin, c->admin) &&
           field_matches(r->is_zero_weight, c->is_zero_weight) &&
           field_matches(r->is_api_removed, c->is_api_removed) &&
           field_matches(r->is_removed, c->is_removed) && field_matches(r->is_new, c->is_new) &&
           field_matches(r->was_in, c->was_in) &&
           field_matches(r->was_guarded, c->was_guarded) &&
           field_matches(r->cause, c->cause) && field_matches(r->in, c->in) &&
           field_matches(r->beat, c->beat) && field_matches(r->agent, c->agent) &&
           field_matches(r->agent_share, c->agent_share) &&
           field_matches(r->is_ejected, c->is_ejected);
}

static void
print_combo(const struct combo *c, size_t pos)
{
    fprintf(stderr, "  [health=%s admin=%s weight=%u api_removed=%d removed=%d new=%d "
            "was_in=%d was_guarded=%d cause=%s beat=%s agent=%s agent_share=%s ejected=%d "
            "at index %zu]\n",
            bal_health_state_name(c->health), bal_admin_name(c->admin),
            c->is_zero_weight ? 0 : WEIGHT, c->is_api_removed, c->is_removed, c->is_new,
            c->was_in, c->was_guarded, cause_names[c->cause], beat_names[c->beat],
            bal_agent_name(c->agent), agent_share_names[c->agent_share], c->is_ejected, pos);
}

static long long
lookup_(const struct rule *rules, size_t n, const struct combo *c, const char *table)
{
    for (size_t i = 0; i < n; i++) {
        if (rule_matches(&rules[i], c))
            return rules[i].out;
    }
    fprintf(stderr, "%s:%d: no rule of %s matches\n", __FILE__, __LINE__, table);
    print_combo(c, 0);
    check_failures++;
    return -1;
}
#define lookup(rules, c) lookup_(rules, sizeof(rules) / sizeof(rules[0]), c, #rules)

#define EXPECT(got, want, c, pos)                                           \
    do {                                                                    \
        long long expect_g_ = (long long)(got), expect_w_ = (long long)(want); \
        if (expect_g_ != expect_w_) {                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %lld (got %lld)\n", \
                    __FILE__, __LINE__, #got, expect_w_, expect_g_);        \
            print_combo(c, pos);                                            \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

/* Decides combination c with the server at index pos of two. */
static void
check_combo(struct combo *c, size_t pos)
{
    struct bal_member m[2];
    size_t other = 1 - pos, cause = pos, in;
    enum bal_cause kind = BAL_CAUSE_BUILD;

    m[other] = (struct bal_member){ .health = BAL_HEALTH_UP, .was_in_rotation = true,
                                    .op.weight = 3, .drain_timeout_ms = DRAIN_MS,
                                    .warn_share = WARN_SHARE };
    m[pos] = (struct bal_member){
        .health = c->health,
        .op = { .admin = c->admin, .weight = c->is_zero_weight ? 0 : WEIGHT,
                .is_api_removed = c->is_api_removed },
        .is_removed = c->is_removed, .is_new = c->is_new, .was_in_rotation = c->was_in,
        .was_guarded = c->was_guarded, .down_since_ms = 1000, .drain_timeout_ms = DRAIN_MS,
        .beat = c->beat, .warn_share = WARN_SHARE,
        .agent = { .state = c->agent, .has_share = c->agent_share != AS_NONE,
                   .share = c->agent_share == AS_HALF ? BAL_SHARE_FULL / 2 : 0 },
        .is_ejected = c->is_ejected,
    };
    switch (c->cause) {
    case CC_BUILD: kind = BAL_CAUSE_BUILD; break;     /* cause ignored */
    case CC_HEALTH_SELF: kind = BAL_CAUSE_HEALTH; break;
    case CC_ADMIN_SELF: kind = BAL_CAUSE_ADMIN; break;
    case CC_HEALTH_OTHER: kind = BAL_CAUSE_HEALTH; cause = other; break;
    case CC_BEAT_SELF: kind = BAL_CAUSE_BEAT; break;
    case CC_AGENT_SELF: kind = BAL_CAUSE_AGENT; break;
    case CC_OUTLIER_SELF: kind = BAL_CAUSE_OUTLIER; break;
    case CC_COUNT: break;
    }

    in = bal_rotation_decide(m, 2, 0, kind, cause);

    c->in = lookup(in_rules, c) == 1;
    EXPECT(m[pos].in_rotation, c->in, c, pos);
    EXPECT(m[pos].is_guarded, lookup(guarded_rules, c), c, pos);
    EXPECT(m[pos].why, lookup(why_rules, c), c, pos);
    EXPECT(m[pos].guard_held, lookup(held_rules, c), c, pos);
    EXPECT(m[pos].guard_released, lookup(released_rules, c), c, pos);
    EXPECT(m[pos].drain_restart, lookup(restart_rules, c), c, pos);
    EXPECT(m[pos].drain_clear, lookup(clear_rules, c), c, pos);
    EXPECT(m[pos].drain_ms, lookup(drain_ms_rules, c), c, pos);
    EXPECT(m[pos].is_warning, lookup(warning_rules, c), c, pos);
    EXPECT(m[pos].share, lookup(share_rules, c), c, pos);
    EXPECT(m[pos].ramp_since_ms, 0, c, pos);
    /* the bystander is untouched, and the count is both */
    EXPECT(m[other].in_rotation, 1, c, pos);
    EXPECT(m[other].why, BAL_WHY_NONE, c, pos);
    EXPECT(m[other].is_guarded || m[other].guard_held || m[other].guard_released ||
           m[other].drain_restart || m[other].drain_clear, 0, c, pos);
    EXPECT(m[other].share, BAL_SHARE_FULL, c, pos);
    EXPECT(in, 1 + c->in, c, pos);
}

static void
test_truth_table(void)
{
    static const enum bal_health_state healths[] = {
        BAL_HEALTH_STARTING, BAL_HEALTH_UP, BAL_HEALTH_DOWN, BAL_HEALTH_PENDING,
        BAL_HEALTH_WARNING,
    };
    static const enum bal_admin admins[] = {
        BAL_ADMIN_NONE, BAL_ADMIN_DRAIN, BAL_ADMIN_DISABLE,
    };
    size_t count = 0, in = 0;

    for (size_t h = 0; h < 5; h++)
    for (int beat = 0; beat < 4; beat++)
    for (size_t a = 0; a < 3; a++)
    for (int zero_weight = 0; zero_weight < 2; zero_weight++)
    for (int api_removed = 0; api_removed < 2; api_removed++)
    for (int removed = 0; removed < 2; removed++)
    for (int is_new = 0; is_new < 2; is_new++)
    for (int was_in = 0; was_in < 2; was_in++)
    for (int was_guarded = 0; was_guarded < 2; was_guarded++)
    for (int cause = 0; cause < CC_COUNT; cause++)
    for (int agent = 0; agent < 5; agent++)
    for (int agent_share = 0; agent_share < AS_COUNT; agent_share++)
    for (int ejected = 0; ejected < 2; ejected++) {
        struct combo c = {
            .health = healths[h], .admin = admins[a], .is_zero_weight = zero_weight,
            .is_api_removed = api_removed, .is_removed = removed,
            .is_new = is_new, .was_in = was_in, .was_guarded = was_guarded,
            .cause = (enum cause_case)cause, .beat = (enum bal_beat)beat,
            .agent = (enum bal_agent)agent, .agent_share = (enum agent_share_case)agent_share,
            .is_ejected = ejected,
        };

        check_combo(&c, 0);
        check_combo(&c, 1);
        count++;
        in += c.in;
    }
    CHECK_EQ_INT(count, 5 * 4 * 3 * 2 * 2 * 2 * 2 * 2 * 2 * CC_COUNT * 5 * AS_COUNT * 2);
    CHECK_EQ_INT(count, 806400);
    /* in rotation only when not removed, admin none, a weight, not
     * deleted, starting, up or warning, the heartbeat not failed, and the
     * agent off or up at a share above 0%, not ejected */
    CHECK_EQ_INT(in, 3 * 3 * 1 * 1 * 1 * 1 * 2 * 2 * 2 * CC_COUNT * 2 * 2);
}

/* ------------------------------------------------------ the guard, a pool */

static struct bal_member
srv(enum bal_health_state health, uint64_t down_since_ms)
{
    return (struct bal_member){ .health = health, .was_in_rotation = true,
                                .down_since_ms = down_since_ms, .op.weight = 1 + (uint32_t)down_since_ms % 5,
                                .drain_timeout_ms = DRAIN_MS };
}

/* Decides and checks what holds for every decision: the count returned,
 * the weight, the edges, who may be guarded. */
static size_t
decide(struct bal_member *m, size_t n, uint32_t floor, enum bal_cause kind, size_t cause)
{
    size_t in = bal_rotation_decide(m, n, floor, kind, cause), count = 0;

    for (size_t i = 0; i < n; i++) {
        const struct bal_member *s = &m[i];

        uint64_t share = s->is_warning ? s->warn_share : BAL_SHARE_FULL;

        if (s->agent.has_share)     /* at most full */
            share = share * (s->agent.share < BAL_SHARE_FULL ? s->agent.share
                                                             : BAL_SHARE_FULL) / BAL_SHARE_FULL;
        count += s->in_rotation;
        CHECK_EQ_INT(s->share, !s->in_rotation ? 0 : share > 0 ? share : 1);
        CHECK_EQ_INT(s->guard_held, s->is_guarded && !s->was_guarded);
        CHECK_EQ_INT(s->guard_released, s->was_guarded && !s->is_guarded && !s->is_removed);
        CHECK_EQ_INT(s->drain_clear, s->in_rotation && !s->was_in_rotation);
        if (s->is_guarded) {
            CHECK(s->in_rotation);
            CHECK((s->health == BAL_HEALTH_DOWN || s->beat == BAL_BEAT_FAIL ||
                   s->agent.state == BAL_AGENT_DOWN || s->is_ejected) &&
                  s->op.admin == BAL_ADMIN_NONE && !bal_agent_is_out(&s->agent) &&
                  !s->is_removed);
        }
    }
    CHECK_EQ_INT(in, count);
    return in;
}

/* The next decision sees this one, as the daemon carries it. */
static void
carry(struct bal_member *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i].was_in_rotation = m[i].in_rotation;
        m[i].was_guarded = m[i].is_guarded;
        m[i].is_new = false;
    }
}

static void
test_floor(void)
{
    /* min_servers, percent, nservers -> floor (percent rounded up) */
    static const struct { uint32_t min; bool pct; size_t n; uint32_t floor; } t[] = {
        { 50, true, 4, 2 },   { 50, true, 3, 2 },   { 1, true, 10, 1 },
        { 0, true, 10, 0 },   { 100, true, 7, 7 },  { 3, false, 4, 3 },
        { 9, false, 4, 4 },   { 1, false, 0, 0 },   { 0, false, 4, 0 },
        { 33, true, 3, 1 },   { 34, true, 3, 2 },   { 66, true, 3, 2 },
        { 67, true, 3, 3 },   { 1, true, 1, 1 },    { 25, true, 4, 1 },
        { 26, true, 4, 2 },   { 100, true, 0, 0 },  { 10000, true, 4, 4 },
        { 50, true, 1000001, 500001 },              { UINT32_MAX, false, 5, 5 },
        { 10000, true, 1000000, 1000000 },
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (bal_guard_floor(t[i].min, t[i].pct, t[i].n) != t[i].floor) {
            fprintf(stderr, "  floor(%u, %d, %zu)\n", t[i].min, t[i].pct, t[i].n);
            CHECK_EQ_INT(bal_guard_floor(t[i].min, t[i].pct, t[i].n), t[i].floor);
        }
    }
}

static void
test_crash_three_of_four(void)
{
    struct bal_member m[4];
    uint32_t floor = bal_guard_floor(50, true, 4);

    for (int i = 0; i < 4; i++) {
        m[i] = srv(BAL_HEALTH_STARTING, 0);
        m[i].is_new = true;
    }
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 4);
    for (int i = 0; i < 4; i++)
        CHECK(m[i].in_rotation && m[i].why == BAL_WHY_NONE && !m[i].is_guarded);
    carry(m, 4);

    /* servers 0, 1, 2 fail in that order */
    m[0].health = BAL_HEALTH_DOWN;
    m[0].down_since_ms = 100;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 0), 3);
    CHECK(!m[0].in_rotation && m[0].why == BAL_WHY_HEALTH && m[0].drain_restart);
    CHECK_EQ_INT(m[0].drain_ms, DRAIN_MS);
    carry(m, 4);
    m[1].health = BAL_HEALTH_DOWN;
    m[1].down_since_ms = 101;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 1), 2);
    CHECK(!m[1].in_rotation && m[1].why == BAL_WHY_HEALTH && m[1].drain_restart);
    CHECK(!m[0].is_guarded && m[0].why == BAL_WHY_NONE);
    carry(m, 4);
    m[2].health = BAL_HEALTH_DOWN;
    m[2].down_since_ms = 102;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 2), 2);
    CHECK(!m[0].in_rotation && !m[0].is_guarded);
    CHECK(!m[1].in_rotation && !m[1].is_guarded);
    /* failed last: held; it is the cause but did not move, so no why and
     * nothing to drain, only the hold edge */
    CHECK(m[2].in_rotation && m[2].is_guarded && m[2].guard_held);
    CHECK_EQ_INT(m[2].why, BAL_WHY_NONE);
    CHECK(!m[2].drain_restart);
    CHECK(m[3].in_rotation && !m[3].is_guarded);
    carry(m, 4);

    /* server 1 fails again and its streak is now the latest: no swap */
    m[1].down_since_ms = 500;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 1), 2);
    CHECK(m[2].in_rotation && m[2].is_guarded && !m[2].guard_held);
    CHECK(!m[1].in_rotation && !m[1].is_guarded && m[1].why == BAL_WHY_NONE);
    for (int i = 0; i < 4; i++)
        CHECK(!m[i].drain_restart && !m[i].drain_clear);
    carry(m, 4);

    /* server 0 recovers: the floor no longer needs server 2 */
    m[0].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 0), 2);
    CHECK(m[0].in_rotation && m[0].why == BAL_WHY_HEALTH && m[0].drain_clear);
    CHECK(!m[2].in_rotation && !m[2].is_guarded && m[2].guard_released);
    CHECK_EQ_INT(m[2].why, BAL_WHY_GUARD_RELEASE);
    CHECK(m[2].drain_restart);
    CHECK_EQ_INT(m[2].drain_ms, DRAIN_MS);
    carry(m, 4);

    /* everyone recovers: all in, none guarded */
    m[1].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 1), 3);
    carry(m, 4);
    m[2].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 2), 4);
    for (int i = 0; i < 4; i++)
        CHECK(m[i].in_rotation && !m[i].is_guarded && !m[i].guard_released);
    CHECK_EQ_INT(m[2].why, BAL_WHY_HEALTH);
}

static void
test_all_fail_at_once(void)
{
    struct bal_member m[4];
    uint32_t floor = bal_guard_floor(3, false, 4);

    /* all four down at a reload; 1, 2 and 3 began failing last: held */
    for (int i = 0; i < 4; i++)
        m[i] = srv(BAL_HEALTH_DOWN, 10 * (uint64_t)i);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 3);
    CHECK(!m[0].in_rotation && !m[0].is_guarded);
    CHECK_EQ_INT(m[0].why, BAL_WHY_RELOAD);
    for (int i = 1; i < 4; i++) {
        CHECK(m[i].is_guarded && m[i].guard_held);
        CHECK_EQ_INT(m[i].why, BAL_WHY_NONE);
    }
}

/* The guard fills the floor one failure at a time, then lets go in the
 * order they failed: the first to fail leaves first. */
static void
test_release_order(void)
{
    struct bal_member m[4];
    uint32_t floor = bal_guard_floor(3, false, 4);

    for (int i = 0; i < 4; i++)
        m[i] = srv(BAL_HEALTH_UP, 0);
    for (int i = 0; i < 4; i++) {
        m[i].health = BAL_HEALTH_DOWN;
        m[i].down_since_ms = 10 * (uint64_t)i;
        CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, (size_t)i), 3);
        carry(m, 4);
    }
    CHECK(!m[0].in_rotation);
    CHECK(m[1].is_guarded && m[2].is_guarded && m[3].is_guarded);

    /* 0 recovers: of the held, 1 failed first and leaves */
    m[0].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 0), 3);
    CHECK(!m[1].in_rotation && m[1].guard_released);
    CHECK_EQ_INT(m[1].why, BAL_WHY_GUARD_RELEASE);
    CHECK(m[2].is_guarded && m[3].is_guarded);
    CHECK_EQ_INT(m[2].why, BAL_WHY_NONE);
    carry(m, 4);

    /* 1 recovers: 2 leaves before 3 */
    m[1].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 1), 3);
    CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
    CHECK(!m[2].in_rotation && m[2].guard_released);
    CHECK_EQ_INT(m[2].why, BAL_WHY_GUARD_RELEASE);
    CHECK(m[3].is_guarded && !m[3].guard_held);
    carry(m, 4);

    /* 2 recovers: the last held goes */
    m[2].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 2), 3);
    CHECK(!m[3].in_rotation && m[3].guard_released);
    CHECK_EQ_INT(m[3].why, BAL_WHY_GUARD_RELEASE);
    carry(m, 4);

    m[3].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 3), 4);
}

static void
test_operator_counts_but_is_not_held(void)
{
    struct bal_member m[4] = {
        srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_UP, 0),
        srv(BAL_HEALTH_DOWN, 5), srv(BAL_HEALTH_DOWN, 6),
    };
    /* the operator's servers count in the pool's size for the floor */
    uint32_t floor = bal_guard_floor(50, true, 4);

    m[2].was_in_rotation = m[3].was_in_rotation = false;
    m[3].op.admin = BAL_ADMIN_DISABLE;

    /* the operator drains 0: 1 alone is below the floor, and of the failing
     * 2 is held (3 failed later but is disabled) */
    m[0].op.admin = BAL_ADMIN_DRAIN;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_ADMIN, 0), 2);
    CHECK(!m[0].in_rotation && !m[0].is_guarded && m[0].drain_restart);
    CHECK_EQ_INT(m[0].why, BAL_WHY_ADMIN);
    CHECK_EQ_INT(m[0].drain_ms, DRAIN_MS);
    CHECK(m[1].in_rotation);
    CHECK(m[2].in_rotation && m[2].is_guarded && m[2].guard_held && m[2].drain_clear);
    CHECK_EQ_INT(m[2].why, BAL_WHY_GUARD_HOLD);
    CHECK(!m[3].in_rotation && !m[3].is_guarded);
    CHECK_EQ_INT(m[3].why, BAL_WHY_NONE);
    carry(m, 4);

    /* the operator disables the held server: the operator wins, and nobody
     * else can be held */
    m[2].op.admin = BAL_ADMIN_DISABLE;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_ADMIN, 2), 1);
    CHECK(!m[2].in_rotation && !m[2].is_guarded && m[2].guard_released);
    CHECK_EQ_INT(m[2].why, BAL_WHY_ADMIN);
    CHECK(m[2].drain_restart);
    CHECK_EQ_INT(m[2].drain_ms, 0);
    carry(m, 4);

    /* the operator enables 3, still failing: the guard holds it at once,
     * and the cause keeps its own why */
    m[3].op.admin = BAL_ADMIN_NONE;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_ADMIN, 3), 2);
    CHECK(m[3].in_rotation && m[3].is_guarded && m[3].guard_held && m[3].drain_clear);
    CHECK_EQ_INT(m[3].why, BAL_WHY_ADMIN);
    CHECK_EQ_INT(m[3].share, BAL_SHARE_FULL);
    CHECK(!m[3].drain_restart);
    carry(m, 4);

    /* draining (not disabling) a held server: out too; so are weight 0
     * and a delete through the API, and each, undone, holds it again */
    for (int k = 0; k < 3; k++) {
        struct bal_operator in = m[3].op;

        if (k == 0)
            m[3].op.admin = BAL_ADMIN_DRAIN;
        else if (k == 1)
            m[3].op.weight = 0;
        else
            m[3].op.is_api_removed = true;
        CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_ADMIN, 3), 1);
        CHECK(!m[3].in_rotation && m[3].guard_released && m[3].drain_restart);
        CHECK_EQ_INT(m[3].why, BAL_WHY_ADMIN);
        CHECK_EQ_INT(m[3].drain_ms, DRAIN_MS);
        /* nobody else is held in its place: 0 is drained, 2 disabled */
        CHECK(!m[0].in_rotation && !m[2].in_rotation);
        carry(m, 4);
        m[3].op = in;
        CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_ADMIN, 3), 2);
        CHECK(m[3].in_rotation && m[3].is_guarded && m[3].guard_held);
        carry(m, 4);
    }
}

/* The cause, out before, moved in by the guard: its why is its own kind
 * (health), not the guard's; another server so moved is the guard's. */
static void
test_cause_held_by_guard(void)
{
    struct bal_member m[3] = {
        srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_DOWN, 40), srv(BAL_HEALTH_DOWN, 30),
    };

    m[1].was_in_rotation = m[2].was_in_rotation = false;
    CHECK_EQ_INT(decide(m, 3, 2, BAL_CAUSE_HEALTH, 1), 2);
    CHECK(m[1].in_rotation && m[1].is_guarded && m[1].guard_held);
    CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
    CHECK(!m[2].in_rotation);
    CHECK_EQ_INT(m[2].why, BAL_WHY_NONE);

    /* the same with another server as the cause: the guard's move */
    m[1] = srv(BAL_HEALTH_DOWN, 40);
    m[1].was_in_rotation = false;
    CHECK_EQ_INT(decide(m, 3, 2, BAL_CAUSE_HEALTH, 2), 2);
    CHECK_EQ_INT(m[1].why, BAL_WHY_GUARD_HOLD);

    /* at a build the guard's moves are the reload's */
    m[1] = srv(BAL_HEALTH_DOWN, 40);
    m[1].was_in_rotation = false;
    CHECK_EQ_INT(decide(m, 3, 2, BAL_CAUSE_BUILD, 1), 2);
    CHECK(m[1].is_guarded && m[1].guard_held);
    CHECK_EQ_INT(m[1].why, BAL_WHY_RELOAD);
    carry(m, 3);
    /* and a floor lowered by a reload lets go with "reload" too */
    CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 1);
    CHECK(!m[1].in_rotation && m[1].guard_released && m[1].drain_restart);
    CHECK_EQ_INT(m[1].why, BAL_WHY_RELOAD);
}

static void
test_pending_never_held(void)
{
    struct bal_member m[4] = {
        srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_PENDING, 90),
        srv(BAL_HEALTH_PENDING, 80), srv(BAL_HEALTH_DOWN, 1),
    };

    /* a reload adds 1 and 2: they wait for a pass; 3, failing since long
     * before, is held instead */
    m[1].is_new = m[2].is_new = true;
    CHECK_EQ_INT(decide(m, 4, 2, BAL_CAUSE_BUILD, 0), 2);
    for (int i = 1; i <= 2; i++) {
        CHECK(!m[i].in_rotation && !m[i].is_guarded && !m[i].drain_restart);
        CHECK_EQ_INT(m[i].why, BAL_WHY_PLACED);
    }
    CHECK(m[3].in_rotation && m[3].is_guarded && m[3].guard_held);
    carry(m, 4);

    /* 1 passes: in, and 3 is let go */
    m[1].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 4, 2, BAL_CAUSE_HEALTH, 1), 2);
    CHECK(m[1].in_rotation && m[1].drain_clear);
    CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
    CHECK(!m[3].in_rotation && m[3].guard_released);
    CHECK_EQ_INT(m[3].why, BAL_WHY_GUARD_RELEASE);

    /* only pending servers to hold: none is */
    m[1] = srv(BAL_HEALTH_PENDING, 5);
    m[3] = srv(BAL_HEALTH_PENDING, 6);
    CHECK_EQ_INT(decide(m, 4, 3, BAL_CAUSE_BUILD, 0), 1);
    for (int i = 1; i < 4; i++)
        CHECK(!m[i].in_rotation && !m[i].is_guarded);
}

static void
test_fewer_candidates_than_floor(void)
{
    struct bal_member m[3] = {
        srv(BAL_HEALTH_DOWN, 1), srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_UP, 0),
    };
    struct bal_member none[1];

    m[2].op.admin = BAL_ADMIN_DISABLE;
    CHECK_EQ_INT(decide(m, 3, 3, BAL_CAUSE_BUILD, 0), 2);
    CHECK(m[0].in_rotation && m[0].is_guarded);
    CHECK(!m[2].in_rotation && !m[2].is_guarded);

    /* a floor above the pool (the caller caps it, the decision copes) */
    m[1] = srv(BAL_HEALTH_DOWN, 2);
    m[2] = srv(BAL_HEALTH_DOWN, 3);
    CHECK_EQ_INT(decide(m, 3, 9, BAL_CAUSE_BUILD, 0), 3);
    for (int i = 0; i < 3; i++)
        CHECK(m[i].is_guarded);

    /* floor 0: all down, nobody held */
    for (int i = 0; i < 3; i++)
        m[i] = srv(BAL_HEALTH_DOWN, (uint64_t)i);
    CHECK_EQ_INT(decide(m, 3, 0, BAL_CAUSE_BUILD, 0), 0);
    for (int i = 0; i < 3; i++)
        CHECK(!m[i].in_rotation && !m[i].is_guarded);

    /* no servers at all */
    CHECK_EQ_INT(bal_rotation_decide(none, 0, 1, BAL_CAUSE_BUILD, 0), 0);
}

/* Percent floors, rounded up, as the guard applies them to a pool whose
 * servers are all down. */
static void
test_percent_floors(void)
{
    static const struct { uint32_t pct; size_t n; size_t held; } t[] = {
        { 0, 3, 0 },  { 1, 3, 1 },  { 33, 3, 1 }, { 34, 3, 2 },  { 50, 3, 2 },
        { 66, 3, 2 }, { 67, 3, 3 }, { 100, 3, 3 }, { 50, 4, 2 }, { 51, 4, 3 },
        { 10, 5, 1 }, { 50, 1, 1 }, { 200, 2, 2 },
    };

    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        struct bal_member m[5];
        size_t n = t[k].n, held = 0;

        for (size_t i = 0; i < n; i++)
            m[i] = srv(BAL_HEALTH_DOWN, 100 + i);
        CHECK_EQ_INT(decide(m, n, bal_guard_floor(t[k].pct, true, n), BAL_CAUSE_BUILD, 0),
                     t[k].held);
        /* the latest failures are the ones held */
        for (size_t i = 0; i < n; i++) {
            CHECK_EQ_INT(m[i].is_guarded, i >= n - t[k].held);
            held += m[i].is_guarded;
        }
        CHECK_EQ_INT(held, t[k].held);
    }
}

static void
test_removed(void)
{
    /* three servers in the config, index 3 removed by this reload */
    struct bal_member m[4] = {
        srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_DOWN, 10),
        srv(BAL_HEALTH_DOWN, 20), srv(BAL_HEALTH_UP, 0),
    };
    uint32_t floor = bal_guard_floor(2, false, 3);

    m[1].was_in_rotation = m[2].was_in_rotation = false;
    m[3].is_removed = true;
    /* the removed server, up, does not make up the floor: 2 is held */
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 2);
    CHECK(!m[3].in_rotation && !m[3].is_guarded && m[3].drain_restart);
    CHECK_EQ_INT(m[3].why, BAL_WHY_REMOVED);
    CHECK_EQ_INT(m[3].drain_ms, DRAIN_MS);
    CHECK(m[2].in_rotation && m[2].is_guarded);
    CHECK(!m[1].in_rotation);

    /* nor is it held, failing last */
    m[3].health = BAL_HEALTH_DOWN;
    m[3].down_since_ms = 99;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 2);
    CHECK(!m[3].in_rotation && !m[3].is_guarded);
    CHECK(m[2].is_guarded && !m[1].is_guarded);

    /* a held server removed: out, no release edge (its guard ends with it) */
    for (int i = 0; i < 4; i++)
        m[i] = srv(BAL_HEALTH_DOWN, 10 * (uint64_t)i);
    m[0].health = BAL_HEALTH_UP;
    m[3].is_removed = true;
    m[3].was_guarded = true;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 2);
    CHECK(!m[3].in_rotation && !m[3].is_guarded && !m[3].guard_released);
    CHECK(!m[3].guard_held && m[3].drain_restart);
    CHECK_EQ_INT(m[3].why, BAL_WHY_REMOVED);
    CHECK(m[2].is_guarded && m[2].guard_held && !m[1].is_guarded);

    /* a removed server that was disabled drains like any removed one */
    m[3].op.admin = BAL_ADMIN_DISABLE;
    decide(m, 4, floor, BAL_CAUSE_BUILD, 0);
    CHECK_EQ_INT(m[3].drain_ms, DRAIN_MS);
    CHECK(m[3].drain_restart);
}

/* ------------------------------------------ the operator's inputs, in order
 *
 * An operator has five inputs on a server: disable, drain, weight 0, the
 * weight back (5), delete. Each is kept as it was last set and none writes
 * another, so every order of them must leave the server where the inputs
 * as last set say. Played here: every order (the weight back only after
 * its 0; delete anywhere, since a members reload that fails leaves a
 * deleted server in the pool, or not at all), one input a step, on a
 * server beside a healthy one, with a floor of 2, so that the guard would
 * hold it if it were allowed to; its health up, then down. After each step:
 * in rotation only while none of its inputs takes it out (down: held by
 * the guard); otherwise disabled while the last of disable and drain was
 * a disable, else draining; when it leaves, its connections drain (a
 * disable: closed at once). disable, weight 0, weight 5 stays disabled.
 */
enum op_input { OP_DISABLE = 0, OP_DRAIN, OP_WEIGHT_0, OP_WEIGHT_BACK, OP_DELETE, OP_COUNT };

static const char *const op_names[] = { "disable", "drain", "weight 0", "weight 5", "delete" };

/* The input as the daemon records it: one field, nothing else. */
static void
op_record(struct bal_operator *op, enum op_input in)
{
    switch (in) {
    case OP_DISABLE: op->admin = BAL_ADMIN_DISABLE; break;
    case OP_DRAIN: op->admin = BAL_ADMIN_DRAIN; break;
    case OP_WEIGHT_0: op->weight = 0; break;
    case OP_WEIGHT_BACK: op->weight = 5; break;
    case OP_DELETE: op->is_api_removed = true; break;
    case OP_COUNT: break;
    }
}

static void
print_order(const enum op_input *order, size_t n, size_t step, enum bal_health_state health)
{
    fprintf(stderr, "  [health %s, after step %zu of:", bal_health_state_name(health), step + 1);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s%s", op_names[order[i]], i + 1 < n ? "," : "");
    fprintf(stderr, "]\n");
}

#define EXPECT_STEP(got, want)                                              \
    do {                                                                    \
        long long g_ = (long long)(got), w_ = (long long)(want);           \
        if (g_ != w_) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %lld (got %lld)\n", \
                    __FILE__, __LINE__, #got, w_, g_);                      \
            print_order(order, n, k, health);                               \
            check_failures++;                                               \
        }                                                                   \
    } while (0)

static void
check_order(const enum op_input *order, size_t n, enum bal_health_state health)
{
    struct bal_member m[2];
    enum bal_admin admin = BAL_ADMIN_NONE;       /* what the inputs said last */
    bool is_zero_weight = false, is_deleted = false, was_in = true;

    m[0] = (struct bal_member){ .health = health, .op.weight = 5, .was_in_rotation = true,
                                .was_guarded = health == BAL_HEALTH_DOWN,
                                .down_since_ms = 100, .drain_timeout_ms = DRAIN_MS };
    m[1] = (struct bal_member){ .health = BAL_HEALTH_UP, .op.weight = 3,
                                .was_in_rotation = true, .drain_timeout_ms = DRAIN_MS };
    for (size_t k = 0; k < n; k++) {
        bool in;
        size_t count;
        enum bal_state want;

        admin = order[k] == OP_DISABLE ? BAL_ADMIN_DISABLE
              : order[k] == OP_DRAIN ? BAL_ADMIN_DRAIN : admin;
        is_zero_weight = order[k] == OP_WEIGHT_0 ? true
                       : order[k] == OP_WEIGHT_BACK ? false : is_zero_weight;
        is_deleted |= order[k] == OP_DELETE;
        in = admin == BAL_ADMIN_NONE && !is_zero_weight && !is_deleted;
        want = in ? BAL_STATE_UP : admin == BAL_ADMIN_DISABLE ? BAL_STATE_DISABLED
                                                              : BAL_STATE_DRAINING;

        op_record(&m[0].op, order[k]);
        count = bal_rotation_decide(m, 2, 2, BAL_CAUSE_ADMIN, 0);
        EXPECT_STEP(m[0].in_rotation, in);
        EXPECT_STEP(bal_state_of(m[0].in_rotation, &m[0].op, 0), want);
        EXPECT_STEP(m[0].is_guarded, in && health == BAL_HEALTH_DOWN);
        EXPECT_STEP(m[0].why, in != was_in ? BAL_WHY_ADMIN : BAL_WHY_NONE);
        EXPECT_STEP(m[0].drain_restart,
                    (was_in && !in) || (!in && admin == BAL_ADMIN_DISABLE));
        if (!in)
            EXPECT_STEP(m[0].drain_ms, admin == BAL_ADMIN_DISABLE ? 0 : DRAIN_MS);
        EXPECT_STEP(m[0].drain_clear, in && !was_in);
        EXPECT_STEP(m[1].in_rotation && !m[1].is_guarded && m[1].why == BAL_WHY_NONE, 1);
        EXPECT_STEP(count, 1 + in);
        /* what stays an input is untouched by the decision */
        EXPECT_STEP(m[0].op.admin, admin);
        EXPECT_STEP(m[0].op.weight, is_zero_weight ? 0 : 5);
        EXPECT_STEP(m[0].op.is_api_removed, is_deleted);
        was_in = in;
        carry(m, 2);
    }
}

/* The next order of a[0..n) in lexicographic order; false after the last. */
static bool
next_order(enum op_input *a, size_t n)
{
    size_t i = n - 1, j = n - 1;

    while (i > 0 && a[i - 1] >= a[i])
        i--;
    if (i == 0)
        return false;
    while (a[j] <= a[i - 1])
        j--;
    enum op_input t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
    for (j = n - 1; i < j; i++, j--) {
        t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    return true;
}

static void
test_operator_orders(void)
{
    enum op_input order[OP_COUNT] = { OP_DISABLE, OP_DRAIN, OP_WEIGHT_0, OP_WEIGHT_BACK,
                                      OP_DELETE };
    size_t orders = 0;

    do {
        size_t at[OP_COUNT];

        for (size_t i = 0; i < OP_COUNT; i++)
            at[order[i]] = i;
        if (at[OP_WEIGHT_BACK] < at[OP_WEIGHT_0])
            continue;                   /* "back" means after the 0 */
        for (int h = 0; h < 2; h++) {
            enum bal_health_state health = h ? BAL_HEALTH_DOWN : BAL_HEALTH_UP;

            check_order(order, OP_COUNT, health);
            if (at[OP_DELETE] == OP_COUNT - 1)  /* the same without the delete */
                check_order(order, OP_COUNT - 1, health);
        }
        orders += 1 + (at[OP_DELETE] == OP_COUNT - 1);
    } while (next_order(order, OP_COUNT));
    CHECK_EQ_INT(orders, 5 * 4 * 3 * 2 / 2 + 4 * 3 * 2 / 2);
    CHECK_EQ_INT(orders, 72);
}

#undef EXPECT_STEP

/* ------------------------------------------------- state, names, deadline */

static void
test_state_of(void)
{
#define N BAL_ADMIN_NONE
#define R BAL_ADMIN_DRAIN
#define D BAL_ADMIN_DISABLE
    static const struct {
        bool in;
        struct bal_operator op;
        uint32_t active;
        enum bal_state state;
    } t[] = {
        { true, { N, 1, false }, 0, BAL_STATE_UP },
        { true, { N, 1, false }, 1, BAL_STATE_UP },
        { true, { R, 1, false }, 0, BAL_STATE_UP },
        { true, { R, 1, false }, 1, BAL_STATE_UP },
        { true, { D, 1, false }, 0, BAL_STATE_UP },
        { true, { D, 1, false }, 1, BAL_STATE_UP },
        { true, { N, 0, true }, 0, BAL_STATE_UP },        /* what was decided */
        { false, { N, 1, false }, 0, BAL_STATE_DOWN },
        { false, { N, 1, false }, 1, BAL_STATE_DRAINING },
        { false, { R, 1, false }, 0, BAL_STATE_DRAINING }, /* HAProxy's DRAIN */
        { false, { R, 1, false }, 1, BAL_STATE_DRAINING },
        { false, { D, 1, false }, 0, BAL_STATE_DISABLED },
        { false, { D, 1, false }, 1, BAL_STATE_DISABLED }, /* being closed: MAINT */
        { false, { N, 1, false }, UINT32_MAX, BAL_STATE_DRAINING },
        { false, { D, 1, false }, UINT32_MAX, BAL_STATE_DISABLED },
        /* weight 0: HAProxy shows DRAIN, also once the last one ended */
        { false, { N, 0, false }, 0, BAL_STATE_DRAINING },
        { false, { N, 0, false }, 3, BAL_STATE_DRAINING },
        { false, { R, 0, false }, 0, BAL_STATE_DRAINING },
        { false, { D, 0, false }, 0, BAL_STATE_DISABLED },
        /* deleted through the API: draining until it is gone */
        { false, { N, 1, true }, 0, BAL_STATE_DRAINING },
        { false, { N, 1, true }, 2, BAL_STATE_DRAINING },
        { false, { R, 0, true }, 0, BAL_STATE_DRAINING },
        { false, { D, 1, true }, 0, BAL_STATE_DISABLED }, /* closed, not drained */
        { false, { D, 0, true }, 1, BAL_STATE_DISABLED },
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (bal_state_of(t[i].in, &t[i].op, t[i].active) != t[i].state) {
            fprintf(stderr, "  state_of(%d, {%s, %u, %d}, %u)\n", t[i].in,
                    bal_admin_name(t[i].op.admin), t[i].op.weight, t[i].op.is_api_removed,
                    t[i].active);
            CHECK_EQ_INT(bal_state_of(t[i].in, &t[i].op, t[i].active), t[i].state);
        }
    }
#undef N
#undef R
#undef D
}

static void
test_names(void)
{
    CHECK_EQ_STR(bal_state_name(BAL_STATE_UP), "up");
    CHECK_EQ_STR(bal_state_name(BAL_STATE_DRAINING), "draining");
    CHECK_EQ_STR(bal_state_name(BAL_STATE_DOWN), "down");
    CHECK_EQ_STR(bal_state_name(BAL_STATE_DISABLED), "disabled");
    CHECK_EQ_STR(bal_state_name((enum bal_state)(BAL_STATE_DISABLED + 1)), "unknown");
    CHECK_EQ_STR(bal_state_name((enum bal_state)99), "unknown");
    CHECK_EQ_STR(bal_admin_name(BAL_ADMIN_NONE), "none");
    CHECK_EQ_STR(bal_admin_name(BAL_ADMIN_DRAIN), "drain");
    CHECK_EQ_STR(bal_admin_name(BAL_ADMIN_DISABLE), "disable");
    CHECK_EQ_STR(bal_admin_name((enum bal_admin)(BAL_ADMIN_DISABLE + 1)), "unknown");
    CHECK_EQ_STR(bal_admin_name((enum bal_admin)99), "unknown");
}

static void
test_drain_deadline(void)
{
    CHECK_EQ_INT(bal_drain_deadline(1000, 5000), 6000);
    CHECK_EQ_INT(bal_drain_deadline(1000, 0), 1000);       /* disable: now */
    CHECK_EQ_INT(bal_drain_deadline(0, 5000), 5000);
    CHECK_EQ_INT(bal_drain_deadline(0, 0), 1);             /* 0 is "none" */
    CHECK_EQ_INT(bal_drain_deadline(1, 0), 1);
    /* large: a monotonic clock of years, the longest drain_timeout (24h) */
    CHECK(bal_drain_deadline(UINT64_C(1) << 62, UINT64_C(86400000)) ==
          (UINT64_C(1) << 62) + UINT64_C(86400000));
    CHECK(bal_drain_deadline(UINT64_MAX - 10, 10) == UINT64_MAX);
    CHECK(bal_drain_deadline(UINT64_C(1) << 63, UINT64_C(1) << 62) ==
          (UINT64_C(1) << 63) + (UINT64_C(1) << 62));
}

/* A blue/green reload: removed servers that serve stay in rotation while
 * any new server waits for its first probe and the caller allows the hold;
 * they leave (and drain) once none is pending or the hold is withdrawn.
 * Never held: one an operator took out, one that was out already. */
static void
test_warm_hold(void)
{
    struct bal_member m[5];

    for (int i = 0; i < 2; i++) {           /* blue: removed, serving */
        m[i] = srv(BAL_HEALTH_UP, 0);
        m[i].is_removed = true;
        m[i].may_warm_hold = true;
    }
    for (int i = 2; i < 4; i++) {           /* green: added, pending */
        m[i] = srv(BAL_HEALTH_PENDING, 0);
        m[i].was_in_rotation = false;
        m[i].is_new = true;
    }
    m[4] = srv(BAL_HEALTH_UP, 0);           /* removed, drained by an operator */
    m[4].is_removed = true;
    m[4].may_warm_hold = true;
    m[4].op.admin = BAL_ADMIN_DRAIN;
    m[4].was_in_rotation = false;

    CHECK_EQ_INT(decide(m, 5, 1, BAL_CAUSE_BUILD, 0), 2);
    for (int i = 0; i < 2; i++) {
        CHECK(m[i].in_rotation && m[i].is_warm_held);
        CHECK_EQ_INT(m[i].why, BAL_WHY_NONE);
        CHECK(!m[i].drain_restart);
        CHECK(!m[i].is_guarded);
    }
    CHECK(!m[2].in_rotation && !m[3].in_rotation);
    CHECK(!m[4].in_rotation && !m[4].is_warm_held && m[4].drain_restart);

    /* one green server passes: the other is still pending, blue stays */
    carry(m, 5);
    m[2].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 5, 1, BAL_CAUSE_HEALTH, 2), 3);
    CHECK(m[0].is_warm_held && m[1].is_warm_held && m[2].in_rotation);
    CHECK_EQ_INT(m[2].why, BAL_WHY_HEALTH);

    /* the last first probe fails: nobody is pending, blue leaves */
    carry(m, 5);
    m[3].health = BAL_HEALTH_DOWN;
    CHECK_EQ_INT(decide(m, 5, 1, BAL_CAUSE_HEALTH, 3), 1);
    for (int i = 0; i < 2; i++) {
        CHECK(!m[i].in_rotation && !m[i].is_warm_held);
        CHECK_EQ_INT(m[i].why, BAL_WHY_REMOVED);
        CHECK(m[i].drain_restart);
        CHECK_EQ_INT(m[i].drain_ms, DRAIN_MS);
    }

    /* the caller's bound: may_warm_hold withdrawn while still pending */
    for (int i = 0; i < 2; i++) {
        m[i] = srv(BAL_HEALTH_UP, 0);
        m[i].is_removed = true;
    }
    m[2] = srv(BAL_HEALTH_PENDING, 0);
    m[2].was_in_rotation = false;
    CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 0);
    CHECK(!m[0].in_rotation && !m[1].in_rotation && m[0].drain_restart);

    /* a pending server an operator disabled does not keep the pool warming */
    for (int i = 0; i < 2; i++) {
        m[i] = srv(BAL_HEALTH_UP, 0);
        m[i].is_removed = true;
        m[i].may_warm_hold = true;
    }
    m[2] = srv(BAL_HEALTH_PENDING, 0);
    m[2].was_in_rotation = false;
    m[2].op.admin = BAL_ADMIN_DISABLE;
    CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 0);
    CHECK(!m[0].is_warm_held && !m[1].is_warm_held);

    /* nor one at weight 0 or deleted through the API; and a removed server
     * such an input took out is never warm-held, even one still in */
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 2; i++) {
            m[i] = srv(BAL_HEALTH_UP, 0);
            m[i].is_removed = true;
            m[i].may_warm_hold = true;
        }
        m[2] = srv(BAL_HEALTH_PENDING, 0);
        m[2].was_in_rotation = false;
        m[2].op.weight = k ? 1 : 0;
        m[2].op.is_api_removed = k;
        CHECK(!bal_is_warming(m[2].health, &m[2].op));
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 0);
        CHECK(!m[0].is_warm_held && !m[1].is_warm_held);

        m[2].op = (struct bal_operator){ .weight = 1 };
        CHECK(bal_is_warming(m[2].health, &m[2].op));
        m[1].op.weight = k ? 1 : 0;
        m[1].op.is_api_removed = k;
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 1);
        CHECK(m[0].is_warm_held && m[0].in_rotation);
        CHECK(!m[1].is_warm_held && !m[1].in_rotation && m[1].drain_restart);
        CHECK_EQ_INT(m[1].why, BAL_WHY_REMOVED);
        CHECK_EQ_INT(m[1].drain_ms, DRAIN_MS);
    }
}

/* A warning server is in rotation, so it counts for the floor: with a floor
 * of 2, one warning and two failing servers, one failing server is held,
 * not two; a heartbeat's failure is failing like a probe's, and may be
 * held. */
static void
test_warning_counts_for_the_guard(void)
{
    struct bal_member m[3] = {
        srv(BAL_HEALTH_WARNING, 0), srv(BAL_HEALTH_DOWN, 10), srv(BAL_HEALTH_UP, 20),
    };

    m[0].warn_share = WARN_SHARE;
    m[2].beat = BAL_BEAT_FAIL;          /* its heartbeat expired */
    CHECK_EQ_INT(decide(m, 3, 2, BAL_CAUSE_HEALTH, 1), 2);
    CHECK(m[0].in_rotation && !m[0].is_guarded && m[0].is_warning);
    CHECK_EQ_INT(m[0].share, WARN_SHARE);
    /* the later failure is held first: the heartbeat's, begun at 20 */
    CHECK(m[2].in_rotation && m[2].is_guarded && !m[2].is_warning);
    CHECK(!m[1].in_rotation);
}

/* ------------------------------------------------------------ slow start */

/* One server of two, coming back by its health at t = 5 s with a 10 s
 * slow start: its share climbs linearly from 1% to full, times the warn
 * share while warning; then the ramp ends. */
static void
test_slow_start(void)
{
    struct bal_member m[2];
    enum bal_health_state health = BAL_HEALTH_UP;

    for (int warn = 0; warn < 2; warn++) {
        uint32_t base = warn ? WARN_SHARE : BAL_SHARE_FULL;

        m[0] = (struct bal_member){ .health = BAL_HEALTH_UP, .was_in_rotation = true,
                                    .op.weight = 3, .slow_start_ms = 10000, .now_ms = 5000 };
        m[1] = (struct bal_member){ .health = warn ? BAL_HEALTH_WARNING : health,
                                    .was_in_rotation = false, .op.weight = 3,
                                    .warn_share = WARN_SHARE, .slow_start_ms = 10000,
                                    .now_ms = 5000 };
        bal_rotation_decide(m, 2, 0, BAL_CAUSE_HEALTH, 1);
        CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
        CHECK_EQ_INT(m[1].ramp_since_ms, 5000);
        CHECK_EQ_INT(m[1].share, base / 100);
        CHECK_EQ_INT(m[0].share, BAL_SHARE_FULL);      /* not ramping */
        CHECK_EQ_INT(m[0].ramp_since_ms, 0);
        for (uint64_t t = 6000; t <= 16000; t += 2500) {
            m[1].was_in_rotation = true;
            m[1].now_ms = m[0].now_ms = t;
            bal_rotation_decide(m, 2, 0, BAL_CAUSE_TIME, 0);
            CHECK_EQ_INT(m[1].why, BAL_WHY_NONE);
            if (t < 15000) {
                CHECK_EQ_INT(m[1].share, base * (t - 5000) / 10000);
                CHECK_EQ_INT(m[1].ramp_since_ms, 5000);
            } else {
                CHECK_EQ_INT(m[1].share, base);
                CHECK_EQ_INT(m[1].ramp_since_ms, 0);
            }
        }
    }

    /* An operator's enable and a heartbeat back ramp too; leaving rotation
     * ends the ramp. */
    for (int k = 0; k < 2; k++) {
        m[1] = (struct bal_member){ .health = BAL_HEALTH_UP, .op.weight = 3,
                                    .slow_start_ms = 10000, .now_ms = 7000,
                                    .beat = BAL_BEAT_PASS };
        bal_rotation_decide(m, 2, 0, k ? BAL_CAUSE_BEAT : BAL_CAUSE_ADMIN, 1);
        CHECK_EQ_INT(m[1].ramp_since_ms, 7000);
        CHECK_EQ_INT(m[1].share, BAL_SHARE_FULL / 100);
        m[1].was_in_rotation = true;
        m[1].beat = BAL_BEAT_FAIL;
        bal_rotation_decide(m, 2, 0, BAL_CAUSE_BEAT, 1);
        CHECK(!m[1].in_rotation);
        CHECK_EQ_INT(m[1].share, 0);
        CHECK_EQ_INT(m[1].ramp_since_ms, 0);
    }

    /* Not at lb's own start (a server's first place), nor when the guard
     * holds a failing server. */
    m[1] = (struct bal_member){ .health = BAL_HEALTH_STARTING, .is_new = true, .op.weight = 3,
                                .slow_start_ms = 10000, .now_ms = 100 };
    m[0].is_new = true;
    m[0].was_in_rotation = false;
    bal_rotation_decide(m, 2, 0, BAL_CAUSE_BUILD, 0);
    CHECK(m[1].in_rotation && m[1].why == BAL_WHY_PLACED);
    CHECK_EQ_INT(m[1].share, BAL_SHARE_FULL);
    CHECK_EQ_INT(m[1].ramp_since_ms, 0);
    m[0] = (struct bal_member){ .health = BAL_HEALTH_DOWN, .was_in_rotation = true,
                                .op.weight = 3, .slow_start_ms = 10000, .now_ms = 100 };
    m[1] = (struct bal_member){ .health = BAL_HEALTH_DOWN, .was_in_rotation = false,
                                .op.weight = 3, .slow_start_ms = 10000, .now_ms = 100,
                                .down_since_ms = 50 };
    bal_rotation_decide(m, 2, 2, BAL_CAUSE_HEALTH, 0);
    CHECK(m[1].is_guarded && m[1].in_rotation);
    CHECK_EQ_INT(m[1].share, BAL_SHARE_FULL);
    CHECK_EQ_INT(m[1].ramp_since_ms, 0);
}

/* ------------------------------------------------------------ the agent */

static struct bal_agent_verdict
agent(enum bal_agent state)
{
    return (struct bal_agent_verdict){ .state = state };
}

static struct bal_agent_verdict
agent_pct(enum bal_agent state, uint32_t pct)
{
    return (struct bal_agent_verdict){ .state = state, .has_share = true,
                                       .share = pct * (BAL_SHARE_FULL / 100) };
}

/* haproxy/haproxy#1176: an agent's "up" lifts only its own earlier word.
 * One server of two, through a run of agent replies and probe verdicts. */
static void
test_agent_up_never_raises(void)
{
    struct bal_member m[2] = { srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_UP, 0) };

    /* the agent says down: out, its why the agent's */
    m[1].agent = agent(BAL_AGENT_DOWN);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].in_rotation && m[1].drain_restart);
    CHECK_EQ_INT(m[1].why, BAL_WHY_AGENT);
    CHECK_EQ_INT(m[1].drain_ms, DRAIN_MS);
    carry(m, 2);
    /* up again: back, the agent's why */
    m[1].agent = agent(BAL_AGENT_UP);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
    CHECK(m[1].in_rotation && m[1].drain_clear);
    CHECK_EQ_INT(m[1].why, BAL_WHY_AGENT);
    carry(m, 2);

    /* the probe fails: out, and the agent's "up" (or "ready", the same
     * verdict) keeps it out */
    m[1].health = BAL_HEALTH_DOWN;
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_HEALTH, 1), 1);
    CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
    carry(m, 2);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].in_rotation);
    CHECK_EQ_INT(m[1].why, BAL_WHY_NONE);
    CHECK(!m[1].drain_restart);
    /* nor does a heartbeat's pass with it */
    m[1].beat = BAL_BEAT_PASS;
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_BEAT, 1), 1);
    CHECK(!m[1].in_rotation);
    /* the probe passes again: in, by its health */
    m[1].health = BAL_HEALTH_UP;
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_HEALTH, 1), 2);
    CHECK_EQ_INT(m[1].why, BAL_WHY_HEALTH);
    carry(m, 2);

    /* a heartbeat's fail: the agent's up does not mask it either */
    m[1].beat = BAL_BEAT_FAIL;
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_BEAT, 1), 1);
    carry(m, 2);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].in_rotation);

    /* an operator's disable: neither */
    m[1] = srv(BAL_HEALTH_UP, 0);
    m[1].op.admin = BAL_ADMIN_DISABLE;
    m[1].was_in_rotation = false;
    m[1].agent = agent(BAL_AGENT_UP);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].in_rotation && !m[1].drain_restart);
    CHECK_EQ_INT(m[1].why, BAL_WHY_NONE);
}

/* The guard: an agent's down is a failure it may hold (a bug in the agent
 * every server runs must not empty the pool); its drain, maint and 0% are
 * the server's own decision, never held, never counted for the floor. */
static void
test_agent_and_the_guard(void)
{
    struct bal_member m[4];
    uint32_t floor = bal_guard_floor(50, true, 4);

    /* every agent says down in one tick: the latest two failures held */
    for (int i = 0; i < 4; i++) {
        m[i] = srv(BAL_HEALTH_UP, 10 * (uint64_t)i);
        m[i].agent = agent(BAL_AGENT_DOWN);
        m[i].is_cause = true;
    }
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_AGENT, 0), 2);
    CHECK(!m[0].in_rotation && !m[1].in_rotation);
    CHECK_EQ_INT(m[0].why, BAL_WHY_AGENT);
    for (int i = 2; i < 4; i++) {
        CHECK(m[i].in_rotation && m[i].is_guarded && m[i].guard_held);
        CHECK_EQ_INT(m[i].why, BAL_WHY_NONE);       /* did not move */
        CHECK_EQ_INT(m[i].share, BAL_SHARE_FULL);
    }
    carry(m, 4);
    for (int i = 0; i < 4; i++)
        m[i].is_cause = false;

    /* the agents come back up: all in, the guard lets go silently */
    for (int i = 0; i < 4; i++)
        m[i].agent = agent(BAL_AGENT_UP);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_AGENT, 0), 4);
    CHECK(m[2].guard_released && m[3].guard_released && m[2].in_rotation);
    carry(m, 4);

    /* three agents drain (a deploy): they leave, nobody holds them, the
     * last one alone is below the floor and stays */
    for (int i = 0; i < 3; i++) {
        m[i].agent = agent(BAL_AGENT_DRAIN);
        CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_AGENT, (size_t)i), 3 - (size_t)i);
        CHECK(!m[i].in_rotation && !m[i].is_guarded && m[i].drain_restart);
        CHECK_EQ_INT(m[i].why, BAL_WHY_AGENT);
        CHECK_EQ_INT(m[i].drain_ms, DRAIN_MS);
        carry(m, 4);
    }
    /* the last server's probe fails: held, and only it (drained servers
     * are no candidates) */
    m[3].health = BAL_HEALTH_DOWN;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 3), 1);
    CHECK(m[3].in_rotation && m[3].is_guarded && m[3].guard_held);
    for (int i = 0; i < 3; i++)
        CHECK(!m[i].in_rotation && !m[i].is_guarded);
    carry(m, 4);

    /* the held server's agent says maint: out at once, connections closed,
     * released; 0% and drain would release it too */
    for (int k = 0; k < 3; k++) {
        m[3].agent = k == 0 ? agent(BAL_AGENT_MAINT) : k == 1 ? agent_pct(BAL_AGENT_UP, 0)
                                                             : agent(BAL_AGENT_DRAIN);
        CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_AGENT, 3), 0);
        CHECK(!m[3].in_rotation && m[3].guard_released && m[3].drain_restart);
        CHECK_EQ_INT(m[3].why, BAL_WHY_AGENT);
        CHECK_EQ_INT(m[3].drain_ms, k == 0 ? 0 : DRAIN_MS);
    }
    /* and its agent back up: held again */
    m[3].agent = agent(BAL_AGENT_UP);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_AGENT, 3), 1);
    CHECK(m[3].is_guarded && m[3].in_rotation);

    /* an agent's down beside probe failures: the latest failure held
     * first, whichever input failed */
    for (int i = 0; i < 4; i++)
        m[i] = srv(BAL_HEALTH_UP, 0);
    m[0].health = BAL_HEALTH_DOWN;
    m[0].down_since_ms = 50;
    m[1].agent = agent(BAL_AGENT_DOWN);
    m[1].down_since_ms = 60;
    m[2].health = BAL_HEALTH_DOWN;
    m[2].down_since_ms = 40;
    m[3].agent = agent(BAL_AGENT_MAINT);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 2);
    CHECK(m[1].is_guarded && m[0].is_guarded);
    CHECK(!m[2].in_rotation && !m[3].in_rotation && !m[3].is_guarded);
    CHECK_EQ_INT(m[3].drain_ms, 0);
}

/* An agent's maint of a server already out closes its connections, as an
 * operator's disable does; its drain leaves them be. */
static void
test_agent_maint_closes(void)
{
    struct bal_member m[2] = { srv(BAL_HEALTH_UP, 0), srv(BAL_HEALTH_DOWN, 5) };

    m[1].was_in_rotation = false;
    m[1].agent = agent(BAL_AGENT_DRAIN);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].drain_restart);
    CHECK_EQ_INT(m[1].why, BAL_WHY_NONE);
    m[1].agent = agent(BAL_AGENT_MAINT);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(m[1].drain_restart);
    CHECK_EQ_INT(m[1].drain_ms, 0);
    CHECK_EQ_INT(m[1].why, BAL_WHY_NONE);
    /* another server's change does not close them again */
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 0), 1);
    CHECK(!m[1].drain_restart);
    /* a removed server in maint drains with drain_timeout, as a disabled one */
    m[1].is_removed = true;
    decide(m, 2, 0, BAL_CAUSE_BUILD, 0);
    CHECK(m[1].drain_restart);
    CHECK_EQ_INT(m[1].drain_ms, DRAIN_MS);
}

/* The agent's N% multiplies into the share, with the warn share and the
 * slow-start ramp. */
static void
test_agent_share(void)
{
    struct bal_member m[2];
    static const struct { uint32_t pct; bool warn; uint32_t share; } t[] = {
        { 100, false, BAL_SHARE_FULL }, { 50, false, 500 }, { 1, false, 10 },
        { 75, true, WARN_SHARE * 3 / 4 }, { 50, true, WARN_SHARE / 2 },
        { 100, true, WARN_SHARE }, { 1, true, 2 },
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        m[0] = srv(BAL_HEALTH_UP, 0);
        m[1] = srv(t[i].warn ? BAL_HEALTH_WARNING : BAL_HEALTH_UP, 0);
        m[1].warn_share = WARN_SHARE;
        m[1].agent = agent_pct(BAL_AGENT_UP, t[i].pct);
        CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
        CHECK_EQ_INT(m[1].share, t[i].share);
        CHECK_EQ_INT(m[1].is_warning, t[i].warn);
        CHECK_EQ_INT(m[0].share, BAL_SHARE_FULL);
        /* a share without a state word is the same */
        m[1].agent.state = BAL_AGENT_OFF;
        CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
        CHECK_EQ_INT(m[1].share, t[i].share);
    }

    /* never 0 in rotation: a warn share of 0.1% at 50% */
    m[1] = srv(BAL_HEALTH_WARNING, 0);
    m[1].warn_share = 1;
    m[1].agent = agent_pct(BAL_AGENT_UP, 50);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
    CHECK_EQ_INT(m[1].share, 1);
    /* a share above full counts as full */
    m[1] = srv(BAL_HEALTH_UP, 0);
    m[1].agent = (struct bal_agent_verdict){ .has_share = true, .share = 5 * BAL_SHARE_FULL };
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
    CHECK_EQ_INT(m[1].share, BAL_SHARE_FULL);
    /* a held server keeps its agent's share: its own word on what it takes */
    m[1] = srv(BAL_HEALTH_DOWN, 3);
    m[1].agent = agent_pct(BAL_AGENT_UP, 40);
    m[0].health = BAL_HEALTH_DOWN;
    CHECK_EQ_INT(decide(m, 2, 1, BAL_CAUSE_HEALTH, 0), 1);
    CHECK(m[1].is_guarded);
    CHECK_EQ_INT(m[1].share, 400);
    m[0].health = BAL_HEALTH_UP;

    /* 0%: out as a weight 0, draining; back at 30% */
    m[1] = srv(BAL_HEALTH_UP, 0);
    m[1].agent = agent_pct(BAL_AGENT_UP, 0);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 1);
    CHECK(!m[1].in_rotation && m[1].drain_restart);
    CHECK_EQ_INT(m[1].why, BAL_WHY_AGENT);
    CHECK_EQ_INT(m[1].share, 0);
    CHECK_EQ_INT(m[1].drain_ms, DRAIN_MS);
    carry(m, 2);
    m[1].agent = agent_pct(BAL_AGENT_UP, 30);
    CHECK_EQ_INT(decide(m, 2, 0, BAL_CAUSE_AGENT, 1), 2);
    CHECK(m[1].in_rotation && m[1].drain_clear);
    CHECK_EQ_INT(m[1].share, 300);

    /* back by its agent with a 10 s slow start, at 50%, warning: the ramp
     * times 50% times the warn share */
    for (int warn = 0; warn < 2; warn++) {
        uint32_t base = (warn ? WARN_SHARE : BAL_SHARE_FULL) / 2;

        m[0] = (struct bal_member){ .health = BAL_HEALTH_UP, .was_in_rotation = true,
                                    .op.weight = 3, .slow_start_ms = 10000, .now_ms = 5000 };
        m[1] = (struct bal_member){ .health = warn ? BAL_HEALTH_WARNING : BAL_HEALTH_UP,
                                    .was_in_rotation = false, .op.weight = 3,
                                    .warn_share = WARN_SHARE, .slow_start_ms = 10000,
                                    .now_ms = 5000, .agent = agent_pct(BAL_AGENT_UP, 50) };
        bal_rotation_decide(m, 2, 0, BAL_CAUSE_AGENT, 1);
        CHECK_EQ_INT(m[1].why, BAL_WHY_AGENT);
        CHECK_EQ_INT(m[1].ramp_since_ms, 5000);
        CHECK_EQ_INT(m[1].share, base / 100);
        for (uint64_t t2 = 7500; t2 <= 15000; t2 += 2500) {
            m[1].was_in_rotation = true;
            m[1].now_ms = m[0].now_ms = t2;
            bal_rotation_decide(m, 2, 0, BAL_CAUSE_TIME, 0);
            CHECK_EQ_INT(m[1].share, t2 < 15000 ? base * (t2 - 5000) / 10000 : base);
        }
        CHECK_EQ_INT(m[1].ramp_since_ms, 0);
    }
}

/* Warming: a removed server its agent asks out is not warm-held, and a
 * pending server its agent asks out does not keep the pool warming. */
static void
test_agent_warm_hold(void)
{
    struct bal_member m[3];

    for (int k = 0; k < 3; k++) {
        struct bal_agent_verdict out = k == 0 ? agent(BAL_AGENT_DRAIN)
                                     : k == 1 ? agent(BAL_AGENT_MAINT)
                                              : agent_pct(BAL_AGENT_OFF, 0);

        for (int i = 0; i < 2; i++) {
            m[i] = srv(BAL_HEALTH_UP, 0);
            m[i].is_removed = true;
            m[i].may_warm_hold = true;
        }
        m[2] = srv(BAL_HEALTH_PENDING, 0);
        m[2].was_in_rotation = false;
        m[1].agent = out;
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 1);
        CHECK(m[0].is_warm_held && !m[1].is_warm_held && !m[1].in_rotation);
        CHECK(m[1].drain_restart);
        CHECK_EQ_INT(m[1].why, BAL_WHY_REMOVED);
        /* an agent's down does not stop the warm hold: warm-held servers
         * are not under health control, whatever says they fail */
        m[1].agent = agent(BAL_AGENT_DOWN);
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 2);
        m[1].agent = agent(BAL_AGENT_OFF);
        m[2].agent = out;
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 0);
        CHECK(!m[0].is_warm_held && !m[1].is_warm_held);
        m[2].agent = agent(BAL_AGENT_DOWN);         /* still pending: warms */
        CHECK_EQ_INT(decide(m, 3, 1, BAL_CAUSE_BUILD, 0), 2);
    }
}

static void
test_agent_state_of(void)
{
    static const struct {
        bool in;
        enum bal_admin admin;
        struct bal_agent_verdict agent;
        uint32_t active;
        enum bal_state state;
    } t[] = {
        { true, BAL_ADMIN_NONE, { BAL_AGENT_MAINT, false, 0 }, 0, BAL_STATE_UP },
        { true, BAL_ADMIN_NONE, { BAL_AGENT_DOWN, false, 0 }, 0, BAL_STATE_UP },   /* held */
        { false, BAL_ADMIN_NONE, { BAL_AGENT_OFF, false, 0 }, 0, BAL_STATE_DOWN },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_UP, false, 0 }, 0, BAL_STATE_DOWN },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_UP, true, 500 }, 0, BAL_STATE_DOWN },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_DOWN, false, 0 }, 0, BAL_STATE_DOWN },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_DOWN, false, 0 }, 2, BAL_STATE_DRAINING },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_DRAIN, false, 0 }, 0, BAL_STATE_DRAINING },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_DRAIN, false, 0 }, 4, BAL_STATE_DRAINING },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_UP, true, 0 }, 0, BAL_STATE_DRAINING },  /* 0% */
        { false, BAL_ADMIN_NONE, { BAL_AGENT_OFF, true, 0 }, 1, BAL_STATE_DRAINING },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_MAINT, false, 0 }, 0, BAL_STATE_DISABLED },
        { false, BAL_ADMIN_NONE, { BAL_AGENT_MAINT, false, 0 }, 3, BAL_STATE_DISABLED },
        { false, BAL_ADMIN_DRAIN, { BAL_AGENT_MAINT, false, 0 }, 3, BAL_STATE_DISABLED },
        { false, BAL_ADMIN_DISABLE, { BAL_AGENT_DRAIN, false, 0 }, 3, BAL_STATE_DISABLED },
        { false, BAL_ADMIN_DRAIN, { BAL_AGENT_UP, false, 0 }, 0, BAL_STATE_DRAINING },
        { false, BAL_ADMIN_DISABLE, { BAL_AGENT_UP, false, 0 }, 0, BAL_STATE_DISABLED },
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct bal_operator op = { .admin = t[i].admin, .weight = 1 };
        enum bal_state got = bal_state_of_agent(t[i].in, &op, &t[i].agent, t[i].active);

        if (got != t[i].state) {
            fprintf(stderr, "  state_of_agent(%d, %s, {%s, %d, %u}, %u)\n", t[i].in,
                    bal_admin_name(t[i].admin), bal_agent_name(t[i].agent.state),
                    t[i].agent.has_share, t[i].agent.share, t[i].active);
            CHECK_EQ_INT(got, t[i].state);
        }
        /* with no agent, bal_state_of */
        if (t[i].agent.state <= BAL_AGENT_UP && !t[i].agent.has_share)
            CHECK_EQ_INT(bal_state_of(t[i].in, &op, t[i].active), got);
    }
    CHECK_EQ_STR(bal_agent_name(BAL_AGENT_OFF), "off");
    CHECK_EQ_STR(bal_agent_name(BAL_AGENT_UP), "up");
    CHECK_EQ_STR(bal_agent_name(BAL_AGENT_DOWN), "down");
    CHECK_EQ_STR(bal_agent_name(BAL_AGENT_DRAIN), "drain");
    CHECK_EQ_STR(bal_agent_name(BAL_AGENT_MAINT), "maint");
    CHECK_EQ_STR(bal_agent_name((enum bal_agent)(BAL_AGENT_MAINT + 1)), "unknown");
    CHECK(!bal_agent_is_out(&(struct bal_agent_verdict){ 0 }));
    CHECK(!bal_agent_is_out(&(struct bal_agent_verdict){ BAL_AGENT_DOWN, true, 1 }));
    CHECK(bal_agent_is_out(&(struct bal_agent_verdict){ BAL_AGENT_UP, true, 0 }));
    CHECK(bal_agent_is_out(&(struct bal_agent_verdict){ BAL_AGENT_DRAIN, false, 0 }));
    CHECK(bal_agent_is_out(&(struct bal_agent_verdict){ BAL_AGENT_MAINT, true, 1000 }));
}

/* Ejected by outlier detection: out as a failing probe is, whatever the
 * probe says; every server ejected at once leaves the guard holding the
 * latest failures (the caller gives an ejected server its ejection time as
 * down_since_ms); the end of its eject time brings it back, with a slow
 * start. */
static void
test_ejected_and_the_guard(void)
{
    struct bal_member m[4];
    uint32_t floor = bal_guard_floor(1, false, 4);

    for (int i = 0; i < 4; i++)
        m[i] = srv(BAL_HEALTH_UP, 0);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 4);
    carry(m, 4);
    /* one ejected: out, drains, its probe passing changes nothing */
    m[0].is_ejected = true;
    m[0].down_since_ms = 100;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_OUTLIER, 0), 3);
    CHECK(!m[0].in_rotation && !m[0].is_guarded && m[0].drain_restart);
    CHECK_EQ_INT(m[0].why, BAL_WHY_OUTLIER);
    CHECK_EQ_INT(m[0].drain_ms, DRAIN_MS);
    carry(m, 4);
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 0), 3);
    CHECK(!m[0].in_rotation && m[0].why == BAL_WHY_NONE);
    carry(m, 4);
    /* all four ejected (max_eject:100%): the floor of 1 holds the last */
    for (int i = 1; i < 4; i++) {
        m[i].is_ejected = true;
        m[i].down_since_ms = 100 + 10 * (uint64_t)i;
        decide(m, 4, floor, BAL_CAUSE_OUTLIER, (size_t)i);
        carry(m, 4);
    }
    CHECK(m[3].in_rotation && m[3].is_guarded);
    for (int i = 0; i < 3; i++)
        CHECK(!m[i].in_rotation);
    /* a probe failure on top of an ejection: still the latest held */
    m[2].health = BAL_HEALTH_DOWN;
    m[2].down_since_ms = 200;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_HEALTH, 2), 1);
    CHECK(m[3].in_rotation && m[3].is_guarded && !m[2].in_rotation);
    carry(m, 4);
    /* server 0's time is over: back at a slow start's first share; the
     * guard lets go of server 3 */
    m[0].is_ejected = false;
    m[0].slow_start_ms = 1000;
    m[0].now_ms = 5000;
    CHECK_EQ_INT(bal_rotation_decide(m, 4, floor, BAL_CAUSE_OUTLIER, 0), 1);
    CHECK(m[0].in_rotation && m[0].drain_clear && m[0].ramp_since_ms == 5000);
    CHECK_EQ_INT(m[0].why, BAL_WHY_OUTLIER);
    CHECK(m[0].share < BAL_SHARE_FULL / 10);
    CHECK(!m[3].in_rotation && m[3].guard_released);
    CHECK_EQ_INT(m[3].why, BAL_WHY_GUARD_RELEASE);
    /* an operator's drain of an ejected server: never held */
    for (int i = 0; i < 4; i++) {
        m[i] = srv(BAL_HEALTH_UP, 10);
        m[i].is_ejected = true;
    }
    m[1].op.admin = BAL_ADMIN_DRAIN;
    m[1].down_since_ms = 99;
    CHECK_EQ_INT(decide(m, 4, floor, BAL_CAUSE_BUILD, 0), 1);
    CHECK(!m[1].in_rotation && !m[1].is_guarded);
}

int
main(void)
{
    test_warm_hold();
    test_truth_table();
    test_operator_orders();
    test_floor();
    test_crash_three_of_four();
    test_all_fail_at_once();
    test_release_order();
    test_operator_counts_but_is_not_held();
    test_cause_held_by_guard();
    test_pending_never_held();
    test_fewer_candidates_than_floor();
    test_percent_floors();
    test_removed();
    test_state_of();
    test_names();
    test_drain_deadline();
    test_slow_start();
    test_warning_counts_for_the_guard();
    test_agent_up_never_raises();
    test_agent_and_the_guard();
    test_agent_maint_closes();
    test_agent_share();
    test_agent_warm_hold();
    test_agent_state_of();
    test_ejected_and_the_guard();
    return CHECK_DONE();
}
