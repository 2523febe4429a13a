/*
 * bal.h - the pool of servers and the algorithms that pick one.
 *
 * Pure code: no libevent, no clock, no I/O, no config parsing. It takes
 * numbers (weights, rotation flags, active connection counts, a client hash)
 * and returns picks, so every algorithm is unit-tested without sockets.
 *
 * Threads: a struct bal_pool is built once (by the main thread, as part of a
 * configuration generation) and its weights never change afterwards. Two
 * fields of each server change while workers pick, and both are atomics:
 *   - in_rotation: written by the main thread (health verdicts, operator
 *     actions), read by every worker on each pick;
 *   - active_connections: bumped by the worker that owns the connection,
 *     read by every worker (leastconn, random).
 * Everything that changes on each pick (smooth round-robin weights, the
 * round-robin cursor, the random state) lives in a struct bal_cursor, one per
 * worker and pool, so picking needs no lock.
 */
#ifndef BAL_H
#define BAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bal_algo {
    BAL_ALGO_ROUNDROBIN = 0,  /* smooth weighted round robin */
    BAL_ALGO_LEASTCONN,       /* fewest active per weight, ties round robin */
    BAL_ALGO_SOURCE,          /* consistent hash of the client address */
    BAL_ALGO_RANDOM,          /* power of two weighted random choices */
};

/* Public because the daemon reads active_connections for its stats and
 * flips in_rotation; the pool owns the array. */
struct bal_server {
    uint32_t weight;                       /* >= 1, immutable */
    uint64_t id_hash;                      /* hash of the server's name: keeps
                                              source hashing stable across
                                              reloads and reorderings */
    _Atomic bool in_rotation;              /* main thread writes */
    _Atomic uint32_t *active_connections;  /* workers write; points to
                                              own_active unless shared */
    _Atomic uint32_t own_active;
};

struct bal_pool {
    enum bal_algo algo;
    size_t nservers;
    struct bal_server *servers;            /* nservers entries */
};

struct bal_cursor;

/* Builds a pool of n servers (n may be 0) with the given weights (each >= 1)
 * and names (used only for their hash). Every server starts in rotation.
 * Returns NULL when out of memory. The caller owns the pool. */
struct bal_pool *bal_pool_new(enum bal_algo algo, size_t n,
                              const uint32_t *weights,
                              const char *const *names);
void bal_pool_free(struct bal_pool *p);

/* Per-thread pick state for one pool. seed varies the random algorithm and
 * the starting point of round robin between threads. NULL when out of
 * memory. The caller owns it; only one thread may use it at a time. */
struct bal_cursor *bal_cursor_new(const struct bal_pool *p, uint64_t seed);
void bal_cursor_free(struct bal_cursor *c);

/* Picks a server for a new connection: returns its index, or -1 when no
 * server is in rotation outside tried[]. client_hash is only used by
 * BAL_ALGO_SOURCE. tried[] lists the indexes already attempted by this
 * connection (connect retries); they are skipped. */
int bal_pick(const struct bal_pool *p, struct bal_cursor *c,
             uint64_t client_hash, const uint32_t *tried, size_t ntried);

/* Rotation and connection accounting; any thread. */
void bal_server_set_in_rotation(struct bal_pool *p, size_t i, bool in);
bool bal_server_in_rotation(const struct bal_pool *p, size_t i);
/* Makes server i count its active connections in counter instead of its
 * own: a server kept across a reload shares one count between the pools of
 * both generations. Before any pick. */
void bal_server_share_active(struct bal_pool *p, size_t i,
                             _Atomic uint32_t *counter);
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
};

enum bal_health_change {
    BAL_HEALTH_UNCHANGED = 0,
    BAL_HEALTH_WENT_DOWN,
    BAL_HEALTH_WENT_UP,
};

struct bal_health {
    enum bal_health_state state;
    uint32_t rise, fall;
    uint32_t consecutive_successes;
    uint32_t consecutive_failures;
    uint64_t streak_started_ms;     /* start of the first probe of the
                                       current run of passes or failures */
};

/* A server of a fresh start: up until its first probe says otherwise. */
void bal_health_init(struct bal_health *h, uint32_t rise, uint32_t fall);
/* A server added to a pool that already serves: out until its first
 * passing probe, so it takes no traffic it may not be ready for. */
void bal_health_init_pending(struct bal_health *h, uint32_t rise, uint32_t fall);

/* Feeds one probe result (in the order the probes started) and returns the
 * change it caused. The only function that moves the state. */
enum bal_health_change bal_health_apply(struct bal_health *h, bool passed,
                                        uint64_t probe_started_ms);
bool bal_health_is_up(const struct bal_health *h);
const char *bal_health_state_name(enum bal_health_state s);

/* ----------------------------------------------------------- guard.c
 * The minimum-pool guard. Pure: the caller fills one entry per server of a
 * pool with its inputs and gets in_rotation and guarded back.
 */
struct bal_guard_server {
    /* inputs */
    bool is_healthy;            /* health checks say up */
    bool is_admin_out;          /* an operator took it out */
    bool was_guarded;           /* held by the previous call */
    uint64_t down_since_ms;     /* when its failing streak began */
    /* outputs */
    bool in_rotation;
    bool guarded;               /* failing, held in rotation by the floor */
};

/* The floor: min_servers as a count, or a percent of nservers rounded up;
 * never more than nservers. */
uint32_t bal_guard_floor(uint32_t min_servers, bool is_percent, size_t nservers);

/* Decides rotation for the n servers of a pool with the given floor. */
void bal_guard_apply(struct bal_guard_server *s, size_t n, uint32_t floor);

#endif /* BAL_H */
