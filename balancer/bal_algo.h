/*
 * bal_algo.h - what pool.c shares with the algorithm files; not for other
 * modules, which use bal.h only.
 */
#ifndef BAL_ALGO_H
#define BAL_ALGO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bal.h"

/* Per-worker pick state for one pool, from bal_cursor_new(); only the
 * thread that owns it reads or writes it, so nothing here is atomic. */
struct bal_cursor {
    size_t nservers;          /* size of the pool it was built for: a cursor
                                 of another pool must not index past its
                                 arrays */
    size_t lc_next;           /* where the next leastconn scan begins: moves
                                 past each pick so tied servers take turns */
    uint64_t rng;             /* splitmix64 state of the random draws */
};

/* The splitmix64 finalizer: a bijection with full avalanche, shared by the
 * hash, the random generator and the Maglev table's permutations. */
static inline uint64_t bal_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

/* Server i's weight for a pick: its configured weight times its share
 * (BAL_SHARE_FULL unless warning or ramping up). Read once per server per
 * pick: the daemon may change a share between two reads. */
static inline uint64_t bal_server_weight(const struct bal_pool *p, size_t i)
{
    uint32_t share = atomic_load_explicit(&p->servers[i].live->share, memory_order_relaxed);

    return (uint64_t)p->servers[i].weight * (share > 0 ? share : 1);
}

/* True when server i can take a connection: in rotation and below its
 * cap. The cap is a hint here; bal_server_take_slot enforces it. */
static inline bool bal_server_available(const struct bal_pool *p, size_t i)
{
    const struct bal_server *s = &p->servers[i];

    if (!atomic_load_explicit(&s->live->in_rotation, memory_order_relaxed))
        return false;
    uint32_t cap = atomic_load_explicit(&s->max_active, memory_order_relaxed);

    return cap == 0 ||
           atomic_load_explicit(&s->live->active_connections, memory_order_relaxed) < cap;
}

/* True when server i may be picked: available and not yet tried by this
 * connection. tried[] holds a handful of retries at most, so a linear scan
 * beats any set structure. */
static inline bool bal_server_eligible(const struct bal_pool *p, size_t i,
                                       const uint32_t *tried, size_t ntried)
{
    if (!bal_server_available(p, i))
        return false;
    for (size_t k = 0; k < ntried; k++)
        if (tried[k] == i)
            return false;
    return true;
}

/* The next number of the cursor's random stream (splitmix64: any state,
 * 0 included, gives a full-period stream, so the seed needs no
 * conditioning). */
uint64_t bal_cursor_random(struct bal_cursor *c);

/* Whether server i, below its full share (warning, slow start), keeps a
 * pick that fell on it: true with probability share, r being uniform. */
bool bal_share_admits(const struct bal_pool *p, size_t i, uint64_t r);

/* draw.c: a random eligible server other than skip (-1: none to skip), in
 * proportion to weight * share, O(1) on average; -1 after BAL_DRAW_TRIES
 * draws that all fell out of reach (the caller decides what then: with
 * half the weight out that is 1 pick in 2^32). */
#define BAL_DRAW_TRIES 32
int bal_draw(const struct bal_pool *p, struct bal_cursor *c, int skip,
             const uint32_t *tried, size_t ntried);

/* The tables built with the pool from its configured weights (bal_pool_new
 * calls those its algorithm needs): false when out of memory. */
bool bal_draw_build(struct bal_pool *p);
bool bal_algo_rr_build(struct bal_pool *p);
bool bal_algo_source_build(struct bal_pool *p);
bool bal_algo_leastconn_build(struct bal_pool *p);

/* leastconn: server i's load, rotation, share or cap changed (any thread),
 * or every server's did (the pool's lives were just shared). */
void bal_algo_leastconn_changed(struct bal_pool *p, size_t i);
void bal_algo_leastconn_refresh(struct bal_pool *p);

/* The algorithms, called by bal_pick() once it has checked that the cursor
 * matches the pool and that the pool is not empty. Each returns a server
 * index or -1 when none is eligible. Caller's thread owns the cursor. */
int bal_algo_rr_pick(const struct bal_pool *p, struct bal_cursor *c,
                     const uint32_t *tried, size_t ntried);
int bal_algo_leastconn_pick(const struct bal_pool *p, struct bal_cursor *c,
                            const uint32_t *tried, size_t ntried);
int bal_algo_source_pick(const struct bal_pool *p, uint64_t client_hash,
                         const uint32_t *tried, size_t ntried);
int bal_algo_random_pick(const struct bal_pool *p, struct bal_cursor *c,
                         const uint32_t *tried, size_t ntried);

#endif /* BAL_ALGO_H */
