/*
 * pool.c - the pool of servers, per-worker cursors, rotation and connection
 * accounting, and the dispatch of bal_pick() to the algorithms.
 */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bal.h"
#include "bal_algo.h"

/* Main thread, while building a generation. The pool copies what it needs
 * from weights[] and names[]; the caller keeps ownership of both. */
struct bal_pool *bal_pool_new(enum bal_algo algo, size_t n,
                              const uint32_t *weights,
                              const char *const *names)
{
    struct bal_pool *p;

    /* Picks are returned as int and tried[] holds uint32_t: a larger pool
     * could not be addressed. It could not be allocated either, hence the
     * same NULL as out of memory. */
    if (n > INT_MAX)
        return NULL;

    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->algo = algo;
    p->nservers = n;
    if (n == 0)
        return p;   /* calloc(0) may return NULL, which is not a failure */

    p->servers = calloc(n, sizeof(*p->servers));
    if (p->servers == NULL) {
        free(p);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct bal_server *s = &p->servers[i];

        /* conf/ rejects weight 0; clamping keeps the random algorithm from
         * dividing by a zero total if a caller ever forgets. */
        s->weight = weights[i] > 0 ? weights[i] : 1;
        s->id_hash = bal_hash_bytes(names[i], strlen(names[i]));
        atomic_init(&s->own_live.in_rotation, true);
        atomic_init(&s->own_live.active_connections, 0);
        atomic_init(&s->own_live.share, BAL_SHARE_FULL);
        s->live = &s->own_live;
    }
    if (!bal_draw_build(p) ||
        (algo == BAL_ALGO_ROUNDROBIN && !bal_algo_rr_build(p)) ||
        (algo == BAL_ALGO_SOURCE && !bal_algo_source_build(p)) ||
        (algo == BAL_ALGO_LEASTCONN && !bal_algo_leastconn_build(p))) {
        bal_pool_free(p);
        return NULL;
    }
    return p;
}

/* Main thread, once no worker can pick from the pool any more. */
void bal_pool_free(struct bal_pool *p)
{
    if (p == NULL)
        return;
    free(p->servers);
    free(p->alias_cut);
    free(p->alias_other);
    free(p->schedule);
    free(p->rr_credit);
    free(p->table);
    free(p->lc_tree);
    free(p->lc_picked_at);
    free(p);
}

/* Any thread; the cursor then belongs to one worker. */
struct bal_cursor *bal_cursor_new(const struct bal_pool *p, uint64_t seed)
{
    struct bal_cursor *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->nservers = p->nservers;
    if (p->nservers > 0)
        c->lc_next = (size_t)(seed % p->nservers);
    c->rng = seed;
    return c;
}

void bal_cursor_free(struct bal_cursor *c)
{
    free(c);
}

/* bal_pick without publishing a leastconn pick: bal_pick_attempt's, whose
 * slot taking publishes it. */
static int bal_pick_one(const struct bal_pool *p, struct bal_cursor *c,
                        uint64_t client_hash, const uint32_t *tried, size_t ntried)
{
    /* A cursor built for another pool would index outside its arrays:
     * refusing to pick is safer than corrupting memory. */
    if (p->nservers == 0 || c->nservers != p->nservers)
        return -1;

    switch (p->algo) {
    case BAL_ALGO_ROUNDROBIN:
        return bal_algo_rr_pick(p, c, tried, ntried);
    case BAL_ALGO_LEASTCONN:
        return bal_algo_leastconn_pick(p, c, tried, ntried);
    case BAL_ALGO_SOURCE:
        return bal_algo_source_pick(p, client_hash, tried, ntried);
    case BAL_ALGO_RANDOM:
        return bal_algo_random_pick(p, c, tried, ntried);
    }
    return -1;
}

/* Worker thread owning c. The cost is O(1) on average for roundrobin,
 * source and random (more while most of the pool is out of reach), and
 * O(log nservers) for leastconn (its tree's replay); times ntried for the
 * tried[] scan. */
int bal_pick(const struct bal_pool *p, struct bal_cursor *c,
             uint64_t client_hash, const uint32_t *tried, size_t ntried)
{
    int i = bal_pick_one(p, c, client_hash, tried, ntried);

    if (i >= 0 && p->lc_tree != NULL)
        bal_algo_leastconn_changed((struct bal_pool *)p, (size_t)i);
    return i;
}

/* The tried server to try again: of those available, the one whose latest
 * attempt is the oldest. tried[] is in attempt order, so that is the first
 * entry that is an available server's last occurrence. */
static int bal_pick_again(const struct bal_pool *p, const uint32_t *tried,
                          size_t ntried)
{
    for (size_t k = 0; k < ntried; k++) {
        bool is_last = true;

        for (size_t j = k + 1; j < ntried && is_last; j++)
            is_last = tried[j] != tried[k];
        if (is_last && tried[k] < p->nservers && bal_server_available(p, tried[k]))
            return (int)tried[k];
    }
    return -1;
}

static bool bal_pool_any_in_rotation(const struct bal_pool *p)
{
    for (size_t i = 0; i < p->nservers; i++)
        if (bal_server_in_rotation(p, i))
            return true;
    return false;
}

/* A lost race for a server's last slot makes it unavailable on the next
 * look, so a few rounds settle; the bound only guards against a pool whose
 * slots free and fill faster than we look. */
#define BAL_TAKE_ROUNDS 8

int bal_pick_attempt(const struct bal_pool *p, struct bal_cursor *c,
                     uint64_t client_hash, const uint32_t *tried,
                     size_t ntried, bool *is_again)
{
    struct bal_pool *mp = (struct bal_pool *)p;    /* slots are atomics */

    for (int round = 0; round < BAL_TAKE_ROUNDS; round++) {
        int i = bal_pick_one(p, c, client_hash, tried, ntried);

        *is_again = false;
        if (i < 0) {
            i = bal_pick_again(p, tried, ntried);
            *is_again = i >= 0;
        }
        if (i < 0)
            break;
        if (bal_server_take_slot(mp, (size_t)i))
            return i;
    }
    return bal_pool_any_in_rotation(p) ? BAL_PICK_FULL : BAL_PICK_NONE;
}

uint32_t bal_retry_pause_ms(struct bal_cursor *c, uint32_t again)
{
    uint32_t base = again >= 7 ? 1000 : 25u << (again > 0 ? again - 1 : 0);

    if (base > 1000)
        base = 1000;
    return base / 2 + (uint32_t)(bal_cursor_random(c) % base);
}

/* Relaxed order throughout: these are counters and flags that a pick reads
 * as a hint, not locks guarding other memory. A worker that sees a server
 * leave rotation one pick late sends it one more connection, which the
 * daemon's retry handles anyway. */

static void bal_server_changed(struct bal_pool *p, size_t i)
{
    if (p->lc_tree != NULL)
        bal_algo_leastconn_changed(p, i);
}

void bal_server_set_in_rotation(struct bal_pool *p, size_t i, bool in)
{
    atomic_store_explicit(&p->servers[i].live->in_rotation, in,
                          memory_order_relaxed);
    bal_server_changed(p, i);
}

void bal_server_set_share(struct bal_pool *p, size_t i, uint32_t share)
{
    atomic_store_explicit(&p->servers[i].live->share, share, memory_order_relaxed);
    bal_server_changed(p, i);
}

bool bal_server_in_rotation(const struct bal_pool *p, size_t i)
{
    return atomic_load_explicit(&p->servers[i].live->in_rotation,
                                memory_order_relaxed);
}

void bal_server_set_cap(struct bal_pool *p, size_t i, uint32_t max_active)
{
    atomic_store_explicit(&p->servers[i].max_active, max_active, memory_order_relaxed);
    bal_server_changed(p, i);
}

bool bal_server_take_slot(struct bal_pool *p, size_t i)
{
    struct bal_server *s = &p->servers[i];
    uint32_t n = atomic_load_explicit(&s->live->active_connections,
                                      memory_order_relaxed);

    if (!bal_server_in_rotation(p, i))
        return false;
    do {
        uint32_t cap = atomic_load_explicit(&s->max_active, memory_order_relaxed);

        if (cap != 0 && n >= cap)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
                 &s->live->active_connections, &n, n + 1,
                 memory_order_relaxed, memory_order_relaxed));
    bal_server_changed(p, i);
    return true;
}

void bal_server_conn_start(struct bal_pool *p, size_t i)
{
    atomic_fetch_add_explicit(&p->servers[i].live->active_connections, 1,
                              memory_order_relaxed);
    bal_server_changed(p, i);
}

void bal_server_conn_end(struct bal_pool *p, size_t i)
{
    uint32_t prev = atomic_fetch_sub_explicit(
        &p->servers[i].live->active_connections, 1, memory_order_relaxed);

    /* Ending a connection that never started is a daemon bug: debug builds
     * stop here. Release builds put the count back to 0 rather than leave
     * it at 4 billion, where leastconn and random would starve the server
     * for good. */
    assert(prev != 0);
    if (prev == 0)
        atomic_fetch_add_explicit(&p->servers[i].live->active_connections, 1,
                                  memory_order_relaxed);
    bal_server_changed(p, i);
}

void bal_server_share(struct bal_pool *p, size_t i, struct bal_live *live)
{
    p->servers[i].live = live;
}

void bal_pool_shared(struct bal_pool *p)
{
    if (p->lc_tree != NULL)
        bal_algo_leastconn_refresh(p);
}

uint32_t bal_server_active(const struct bal_pool *p, size_t i)
{
    return atomic_load_explicit(&p->servers[i].live->active_connections,
                                memory_order_relaxed);
}

/* FNV-1a is short and good enough to spread bytes over 64 bits, but its low
 * bits and short inputs avalanche poorly (an IPv4 address is 4 bytes), so
 * the finalizer mixes every input bit into every output bit. Inputs are
 * addresses and names of a few dozen bytes, so byte-at-a-time is fine. */
uint64_t bal_hash_bytes(const void *data, size_t len)
{
    const unsigned char *b = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325);

    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return bal_mix64(h ^ len);
}
