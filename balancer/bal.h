/*
 * bal.h - the pool of servers and the algorithms that pick one.
 *
 * Pure code: no libevent, no clock, no I/O, no config parsing. It takes
 * numbers (weights, rotation flags, active connection counts, a client hash)
 * and returns picks, so every algorithm is unit-tested without sockets.
 *
 * Threads: a struct bal_pool is built once (by the main thread, as part of a
 * configuration generation) and its weights never change afterwards. Three
 * fields of each server change while workers pick, atomics in its struct
 * bal_live:
 *   - in_rotation and share (of its weight): written by one thread at a
 *     time (the daemon's, under its state lock: what bal_rotation_decide
 *     returned), read by every worker on each pick;
 *   - active_connections: bumped by the worker that owns the connection,
 *     read by every worker (leastconn, random).
 * What the algorithms keep for the pool as a whole (the round-robin
 * rotation and credits, leastconn's tree and pick stamps) is atomics in
 * struct bal_pool, written by any worker without a lock; what is one
 * worker's own (the random state, leastconn's scan start) lives in a
 * struct bal_cursor, one per worker and pool.
 */
#ifndef BAL_H
#define BAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bal_algo {
    BAL_ALGO_ROUNDROBIN = 0,  /* weighted round robin, turns spread */
    BAL_ALGO_LEASTCONN,       /* fewest (active + 1) per weight, ties to
                                 the one picked longest ago */
    BAL_ALGO_SOURCE,          /* consistent hash of the client address
                                 (a Maglev table) */
    BAL_ALGO_RANDOM,          /* power of two weighted random choices */
};

/* What changes about a server while workers pick: its place in rotation
 * (written under the daemon's state lock, from bal_rotation_decide's
 * verdict) and its open connections (bumped by the worker that owns each
 * one). A server kept by a reload is one struct bal_live shared by the
 * pools of every generation that has it, so a session of an old generation
 * that retries sees today's rotation, and a connection is counted once. */
struct bal_live {
    _Atomic bool in_rotation;
    _Atomic uint32_t active_connections;
    _Atomic uint32_t share;         /* of its weight, in BAL_SHARE_FULL
                                       parts: lower while warning or
                                       ramping up (slow start); written
                                       from the decision, like in_rotation */
};

/* A share of a server's weight, in thousandths: the algorithms weigh a
 * server by weight * share, so that 25% of a weight 1 still counts. */
#define BAL_SHARE_FULL 1000u

/* Public because the daemon reads active_connections for its stats; the
 * pool owns the array. */
struct bal_server {
    uint32_t weight;                       /* >= 1, immutable */
    _Atomic uint32_t max_active;           /* connection cap, 0 = none:
                                              its max_connections, or what
                                              its agent says (maxconn:N),
                                              set while workers pick */
    uint64_t id_hash;                      /* hash of the server's name: keeps
                                              source hashing stable across
                                              reloads and reorderings */
    struct bal_live *live;                 /* points to own_live unless
                                              shared (bal_server_share) */
    struct bal_live own_live;
};

struct bal_pool {
    enum bal_algo algo;
    size_t nservers;
    struct bal_server *servers;            /* nservers entries */
    /* Built with the pool from its weights and read by every worker (the
     * algorithm files say how); NULL where the identity does. */
    uint32_t *alias_cut, *alias_other;     /* weighted draws: draw.c */
    uint32_t *schedule;                    /* roundrobin: server of each
                                              slot */
    size_t schedule_len;
    _Atomic uint32_t *rr_credit;           /* roundrobin: per server, the
                                              shares of its turns so far */
    _Atomic uint64_t rr_next;              /* roundrobin: turns given, all
                                              workers together */
    uint32_t *table;                       /* source: the Maglev table */
    size_t table_len;
    /* leastconn's tournament tree, written by any thread as servers
     * change: node k's winner is the better of nodes 2k and 2k + 1's,
     * leaf lc_leaves + i is server i, the root is node 1. */
    _Atomic uint32_t *lc_tree;
    size_t lc_leaves;
    _Atomic uint64_t *lc_picked_at;        /* per server: lc_clock at its
                                              last pick (ties) */
    _Atomic uint64_t lc_clock;
};

struct bal_cursor;

/* Builds a pool of n servers (n may be 0) with the given weights (each >= 1)
 * and names (used only for their hash). Every server starts in rotation.
 * Returns NULL when out of memory. The caller owns the pool. */
struct bal_pool *bal_pool_new(enum bal_algo algo, size_t n,
                              const uint32_t *weights,
                              const char *const *names);
void bal_pool_free(struct bal_pool *p);

/* Per-thread pick state for one pool. seed varies the random draws and
 * where leastconn's scans start between threads. NULL when out of
 * memory. The caller owns it; only one thread may use it at a time. */
struct bal_cursor *bal_cursor_new(const struct bal_pool *p, uint64_t seed);
void bal_cursor_free(struct bal_cursor *c);

/* Picks a server for a new connection: returns its index, or -1 when no
 * server is in rotation outside tried[]. client_hash is only used by
 * BAL_ALGO_SOURCE. tried[] lists the indexes already attempted by this
 * connection (connect retries); they are skipped. */
int bal_pick(const struct bal_pool *p, struct bal_cursor *c,
             uint64_t client_hash, const uint32_t *tried, size_t ntried);

/* Picks a server for attempt ntried + 1 of one connection and takes one of
 * its connection slots (bal_server_conn_end gives it back). Servers in
 * rotation that this connection has not tried come first, as bal_pick
 * orders them; once every one was tried, the one whose latest attempt is
 * the oldest is tried again and *is_again is set (redispatch). A server at
 * its cap (max_active) is passed over. Returns the index, BAL_PICK_NONE
 * when no server is in rotation, BAL_PICK_FULL when every server in
 * rotation is at its cap (the caller may queue the connection). */
#define BAL_PICK_NONE (-1)
#define BAL_PICK_FULL (-2)
int bal_pick_attempt(const struct bal_pool *p, struct bal_cursor *c,
                     uint64_t client_hash, const uint32_t *tried,
                     size_t ntried, bool *is_again);

/* Takes a slot of server i if it is in rotation and below its cap: the
 * check and the count are one atomic step, so workers racing for the last
 * slot cannot both win. */
bool bal_server_take_slot(struct bal_pool *p, size_t i);

/* The pause before trying a server again that this connection already
 * tried (again-th time, >= 1): 25 ms doubling per repeat, at most 1 s,
 * jittered to 50-150% from the cursor's random stream so that the
 * connects a burst lost do not return in one wave. */
uint32_t bal_retry_pause_ms(struct bal_cursor *c, uint32_t again);

/* Rotation and connection accounting; any thread. Each tells the pool's
 * algorithm that server i changed: write a server's rotation, share or
 * cap through these only. */
void bal_server_set_cap(struct bal_pool *p, size_t i, uint32_t max_active);
void bal_server_set_in_rotation(struct bal_pool *p, size_t i, bool in);
void bal_server_set_share(struct bal_pool *p, size_t i, uint32_t share);
bool bal_server_in_rotation(const struct bal_pool *p, size_t i);
/* Makes server i use live instead of its own: the daemon keeps one per
 * server across reloads. Before any pick; then bal_pool_shared, once all
 * are shared, lets the algorithm see what the lives hold. */
void bal_server_share(struct bal_pool *p, size_t i, struct bal_live *live);
void bal_pool_shared(struct bal_pool *p);
void bal_server_conn_start(struct bal_pool *p, size_t i);
void bal_server_conn_end(struct bal_pool *p, size_t i);
uint32_t bal_server_active(const struct bal_pool *p, size_t i);

/* A 64-bit hash of a byte string (client addresses, server names). */
uint64_t bal_hash_bytes(const void *data, size_t len);

/* ---------------------------------------------------------- health.c
 * A server's health from consecutive probe results (rise and fall). Pure:
 * the caller owns the struct (the daemon's main thread) and passes times in.
 */
enum bal_health_state {
    BAL_HEALTH_STARTING = 0,    /* no probe finished yet; counts as up */
    BAL_HEALTH_UP,
    BAL_HEALTH_DOWN,
    BAL_HEALTH_PENDING,         /* added to a serving pool (reload): no
                                   probe finished yet; counts as down */
    BAL_HEALTH_WARNING,         /* alive but overloaded (check_warn): in
                                   rotation at warn_weight */
};

/* One probe's verdict (a bool converts: false is FAIL, true PASS). */
enum bal_result {
    BAL_RESULT_FAIL = 0,
    BAL_RESULT_PASS,
    BAL_RESULT_WARN,            /* an answer in check_warn */
};

enum bal_health_change {
    BAL_HEALTH_UNCHANGED = 0,
    BAL_HEALTH_WENT_DOWN,
    BAL_HEALTH_WENT_UP,         /* into rotation: from down or pending, to
                                   up or warning */
    BAL_HEALTH_WARNED,          /* up to warning */
    BAL_HEALTH_CLEARED,         /* warning to up */
};

struct bal_health {
    enum bal_health_state state;
    uint32_t rise, fall;
    uint32_t consecutive_successes; /* passes */
    uint32_t consecutive_failures;  /* fails */
    uint32_t consecutive_alive;     /* passes and warnings */
    uint64_t streak_started_ms;     /* start of the first probe of the
                                       current run of passes or failures */
};

/* A server of a fresh start: up until its first probe says otherwise. */
void bal_health_init(struct bal_health *h, uint32_t rise, uint32_t fall);
/* A server added to a pool that already serves: out until its first
 * passing probe, so it takes no traffic it may not be ready for. */
void bal_health_init_pending(struct bal_health *h, uint32_t rise, uint32_t fall);

/* Feeds one probe result (in the order the probes started) and returns the
 * change it caused. The only function that moves the state on a probe. */
enum bal_health_change bal_health_apply(struct bal_health *h, enum bal_result r,
                                        uint64_t probe_started_ms);
bool bal_health_is_up(const struct bal_health *h);
const char *bal_health_state_name(enum bal_health_state s);

/* Sets, before its first probe, the health a server had elsewhere: a state
 * file (saved.c's lines), the process it takes over from, or none at all
 * (a pool without checks: up). After bal_health_init*, whose rise and fall
 * it keeps. state is up, down or warning, successes and failures its
 * current streaks, streak_started_ms when the first probe of that streak
 * started (the caller's clock; now when not known). A down server's rise
 * starts over: it stays out until rise probes of its own pass. false, h
 * unchanged, for another state, or for passes and failures at once (no
 * run of probes leaves both). */
bool bal_health_restore(struct bal_health *h, enum bal_health_state state,
                        uint32_t successes, uint32_t failures, uint64_t streak_started_ms);

/* --------------------------------------------------------- rotation.c
 * A pool's rotation: for every server, from all of its inputs, whether it
 * is in rotation, held there by the minimum-pool guard, at what weight, and
 * why it moved. The one place that decides; the daemon carries out what it
 * returns. Pure: the caller fills the inputs and passes the pool's floor.
 */
enum bal_admin {
    BAL_ADMIN_NONE = 0,         /* health checks decide */
    BAL_ADMIN_DRAIN,            /* out; open connections finish */
    BAL_ADMIN_DISABLE,          /* out (maintenance); connections closed */
};

/* What the operators asked of one server, each input as it was last set:
 * none of them writes another (a weight leaves admin as it was, and so
 * does a delete), so that disable, weight 0, weight 5 leaves the server
 * disabled. Any of them can take the server out; it is back in only when
 * all allow it. */
struct bal_operator {
    enum bal_admin admin;       /* enable (none), drain or disable */
    uint32_t weight;            /* effective: the admin API's weight, else
                                   the configured one. 0 = in the pool, no
                                   new connections: it drains (HAProxy's
                                   weight 0, shown DRAIN). Only 0 or not
                                   matters here: picks weigh by the pool's
                                   weights */
    bool is_api_removed;        /* deleted through the admin API: out at
                                   once, drains with drain_timeout until a
                                   reload takes it out of the pool */
};

/* Out by an operator's input: drain, disable, weight 0 or a delete. Never
 * held by the guard nor counted for its floor, never warm-held. */
bool bal_operator_is_out(const struct bal_operator *op);

/* A server's heartbeats (heartbeat_ttl): a second input that can only
 * lower its health, never mask a failing probe. */
enum bal_beat {
    BAL_BEAT_OFF = 0,           /* its pool has no heartbeat_ttl */
    BAL_BEAT_PASS,              /* fresh, reported pass */
    BAL_BEAT_WARN,              /* fresh, reported warn: warning */
    BAL_BEAT_FAIL,              /* reported fail, or none within the TTL */
};

/* "off", "pass", "warn", "fail": for logs and JSON. */
const char *bal_beat_name(enum bal_beat b);

/* A server's agent (agent_port, HAProxy's agent-check): the server's own
 * word on itself, as its agent last gave it (an agent that cannot be
 * reached, or that says what it may not, changes nothing: the caller keeps
 * the last verdict). Like the heartbeat it only ever lowers. */
enum bal_agent {
    BAL_AGENT_OFF = 0,          /* no agent, or no state word from it yet */
    BAL_AGENT_UP,               /* "up" or "ready": lifts only the agent's
                                   own earlier word, never a failing probe
                                   or heartbeat (haproxy/haproxy#1176) */
    BAL_AGENT_DOWN,             /* failing, as a failing probe: out, and
                                   the guard may hold it */
    BAL_AGENT_DRAIN,            /* out, open connections finish (as an
                                   operator's drain): never held */
    BAL_AGENT_MAINT,            /* out, connections closed (as an
                                   operator's disable): never held */
};

/* What the agent said last. A zeroed one is no agent: BAL_AGENT_OFF at
 * full share. */
struct bal_agent_verdict {
    enum bal_agent state;
    bool has_share;             /* it gave an N%; false: full share */
    uint32_t share;             /* with has_share: N% of its weight, in
                                   BAL_SHARE_FULL parts (N * 10), at most
                                   BAL_SHARE_FULL. 0 (0%) takes it out as
                                   an operator's weight 0 does: it drains,
                                   never held (HAProxy shows DRAIN) */
};

/* "off", "up", "down", "drain", "maint": for logs and JSON. */
const char *bal_agent_name(enum bal_agent a);

/* Out by its agent's own decision: drain, maint or 0%. As an operator's
 * input: never held by the guard nor counted for its floor, never
 * warm-held. Its "down" is a failure instead, which the guard may hold. */
bool bal_agent_is_out(const struct bal_agent_verdict *a);

/* What made the caller ask for a decision. */
enum bal_cause {
    BAL_CAUSE_BUILD = 0,        /* a generation was built: start or reload */
    BAL_CAUSE_HEALTH,           /* server `cause` got a new health verdict */
    BAL_CAUSE_ADMIN,            /* an operator acted on server `cause`:
                                   enable, drain, disable, weight, delete */
    BAL_CAUSE_BEAT,             /* server `cause`'s heartbeat changed */
    BAL_CAUSE_TIME,             /* time passed: slow-start ramps move on */
    BAL_CAUSE_AGENT,            /* server `cause`'s agent said something
                                   else than before */
    BAL_CAUSE_OUTLIER,          /* server `cause` was ejected by outlier
                                   detection, or its eject time is over */
};

/* Why a server moved; the caller turns it into its log text. */
enum bal_why {
    BAL_WHY_NONE = 0,           /* it did not move */
    BAL_WHY_PLACED,             /* first decision about a new server: its
                                   starting place, not a change */
    BAL_WHY_RELOAD,             /* a reload changed its pool */
    BAL_WHY_REMOVED,            /* a reload removed it: it drains */
    BAL_WHY_HEALTH,             /* its own health verdict */
    BAL_WHY_ADMIN,              /* an operator's action on it */
    BAL_WHY_BEAT,               /* its heartbeat (failed, expired, back) */
    BAL_WHY_GUARD_HOLD,         /* failing, held in by min_servers */
    BAL_WHY_GUARD_RELEASE,      /* failing, let go by min_servers */
    BAL_WHY_AGENT,              /* its agent (down, drain, maint, 0%, or
                                   back) */
    BAL_WHY_OUTLIER,            /* ejected from live traffic, or back at
                                   the end of its eject time */
};

struct bal_member {
    /* inputs */
    enum bal_health_state health;
    struct bal_operator op;
    bool is_removed;            /* gone from the config (reload) */
    bool is_new;                /* never decided before */
    bool was_in_rotation;       /* the previous decision, as published */
    bool was_guarded;
    uint64_t down_since_ms;     /* when its failing streak began */
    uint64_t drain_timeout_ms;  /* of its pool */
    bool may_warm_hold;         /* removed: may stay in rotation while the
                                   pool warms (a reload's first probes) */
    enum bal_beat beat;
    uint32_t warn_share;        /* of its weight while warning (warn_weight),
                                   in BAL_SHARE_FULL parts */
    uint64_t slow_start_ms;     /* of its pool; 0 = off */
    uint64_t now_ms;            /* monotonic: where slow start is */
    uint64_t ramp_since_ms;     /* in and out: when its slow start began,
                                   0 = none (not ramping) */
    bool is_cause;              /* its input changed too, besides the
                                   member `cause` names (many heartbeats
                                   expiring in one tick: one decision) */
    struct bal_agent_verdict agent;     /* zeroed: no agent */
    bool is_ejected;            /* outlier detection ejected it and its
                                   eject time is not over (bal_outlier.h):
                                   a failure, as a failing probe, so the
                                   guard may hold it */

    /* outputs */
    bool in_rotation;
    bool is_guarded;            /* failing, held in rotation by the floor */
    bool is_warning;            /* in rotation at warn_share: its probe
                                   or its heartbeat says warning */
    uint32_t share;             /* of its weight, BAL_SHARE_FULL parts: warn
                                   share, times the agent's, times the
                                   ramp; 0 when out */
    enum bal_why why;           /* why in_rotation differs from before */
    bool is_warm_held;          /* removed, kept in rotation: the pool
                                   still waits for new servers' first
                                   probes */
    bool guard_held;            /* edge: is_guarded and not was_guarded */
    bool guard_released;        /* edge: was_guarded and not is_guarded */
    /* Drain: when drain_restart, the server's open connections are to be
     * closed drain_ms from now (0: at once); when it came back into
     * rotation, nothing is to be closed (drain_clear). */
    bool drain_restart;
    bool drain_clear;
    uint64_t drain_ms;
};

/* A server a reload added that waits for its first probe and is under
 * health control (no operator input takes it out): while a pool has one,
 * it warms. */
bool bal_is_warming(enum bal_health_state health, const struct bal_operator *op);

/* The floor: min_servers as a count, or a percent of nservers rounded up;
 * never more than nservers. */
uint32_t bal_guard_floor(uint32_t min_servers, bool is_percent, size_t nservers);

/* Decides the n members of one pool (removed servers of the pool included:
 * they never count towards the floor). cause is the index of the member
 * whose input changed (ignored for BAL_CAUSE_BUILD and BAL_CAUSE_TIME);
 * members with is_cause set count as causes of the same kind too. Returns
 * how many are in rotation. */
size_t bal_rotation_decide(struct bal_member *m, size_t n, uint32_t floor,
                           enum bal_cause kind, size_t cause);

/* The state an operator reads, from the decision, the operator's inputs
 * and the open connections: up (in rotation, guarded too), disabled
 * (disabled by an operator, its connections closed or being closed),
 * draining (out by an operator's drain, weight 0 or delete, or out by
 * health with connections open), down (out by health, none open). */
enum bal_state {
    BAL_STATE_UP = 0,
    BAL_STATE_DRAINING,
    BAL_STATE_DOWN,
    BAL_STATE_DISABLED,
};
enum bal_state bal_state_of(bool in_rotation, const struct bal_operator *op,
                            uint32_t active);
/* The same with the server's agent: its maint reads disabled (its
 * connections are closed, as a disable's), its drain or 0% draining (as
 * an operator's drain or weight 0), its down as a failing probe (down,
 * draining while connections are open). bal_state_of is this with no
 * agent. */
enum bal_state bal_state_of_agent(bool in_rotation, const struct bal_operator *op,
                                  const struct bal_agent_verdict *agent, uint32_t active);
const char *bal_state_name(enum bal_state s);
const char *bal_admin_name(enum bal_admin a);

/* When the open connections of a server that leaves rotation now are to be
 * closed: now + timeout, never 0 (0 means "no deadline"). */
uint64_t bal_drain_deadline(uint64_t now_ms, uint64_t timeout_ms);

/* ------------------------------------------------------------ saved.c
 * A server's state as the state file keeps it (one line each; see saved.c
 * for the format, two line kinds of bal_lines.h). Pure. */
struct bal_saved {
    char pool[64], name[64];        /* CONF_NAME_MAX + 1 */
    char addr[280];                 /* as written in the config */
    enum bal_health_state health;   /* up, down or warning */
    uint32_t successes, failures;   /* the current streaks */
    enum bal_admin admin;
    uint64_t down_ms;               /* how long its failing streak had run */
};

/* "lb-state 1 UNIX_TIME": 0 with the time, -1 when not that. */
int bal_saved_header(const char *line, double *written_at);
/* The header and one server's line, each ending in "\n", into buf: the
 * length, or 0 when it does not fit. */
size_t bal_saved_format_header(char *buf, size_t len, double written_at);
size_t bal_saved_format(char *buf, size_t len, const struct bal_saved *s);
/* One server's line without its "\n": 0, or -1 with err set. */
int bal_saved_parse(const char *line, struct bal_saved *out, char *err, size_t errlen);

#endif /* BAL_H */
