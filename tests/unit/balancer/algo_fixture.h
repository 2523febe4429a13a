/*
 * algo_fixture.h - what the tests of the four algorithms share: a pool of
 * up to eight servers named "a" to "h", their loads, and the pick loops.
 * The k-th pick of a loop is the k-th client (algo_client): the source
 * algorithm hashes it, the others ignore it, so one loop serves all four.
 */
#ifndef ALGO_FIXTURE_H
#define ALGO_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "bal.h"
#include "check.h"

/* n servers (at most 8) with weights w, named "a", "b", ... */
static inline struct bal_pool *
algo_pool(enum bal_algo algo, size_t n, const uint32_t *w)
{
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};

    return bal_pool_new(algo, n, w, names);
}

/* Server i's open connections, as the workers would have counted them. */
static inline void
algo_set_active(struct bal_pool *p, size_t i, uint32_t n)
{
    atomic_store(&p->servers[i].live->active_connections, n);
    bal_pool_shared(p);     /* the count changed behind the pool's back */
}

/* The k-th client's address hash (192.168.x.y). */
static inline uint64_t
algo_client(uint32_t k)
{
    uint32_t addr = UINT32_C(0xc0a80000) + k;

    return bal_hash_bytes(&addr, sizeof(addr));
}

/* Picks n times, one client each, and adds each pick to count[server];
 * with is_held each pick is a connection that never ends (leastconn and
 * random then see the load build up). Every pick must find a server. */
static inline void
algo_count_picks(struct bal_pool *p, struct bal_cursor *c, int n, const uint32_t *tried,
                 size_t ntried, bool is_held, int *count)
{
    for (int k = 0; k < n; k++) {
        int i = bal_pick(p, c, algo_client((uint32_t)k), tried, ntried);

        CHECK(i >= 0 && (size_t)i < p->nservers);
        if (i < 0 || (size_t)i >= p->nservers)
            continue;
        count[i]++;
        if (is_held)
            bal_server_conn_start(p, (size_t)i);
    }
}

/* Picks n times (client 0) and writes the servers picked as letters, '-'
 * for none, into out (n + 1 bytes). */
static inline void
algo_picks(struct bal_pool *p, struct bal_cursor *c, int n, const uint32_t *tried,
           size_t ntried, char *out)
{
    for (int k = 0; k < n; k++) {
        int i = bal_pick(p, c, 0, tried, ntried);

        out[k] = i < 0 ? '-' : (char)('a' + i);
    }
    out[n] = '\0';
}

#endif /* ALGO_FIXTURE_H */
