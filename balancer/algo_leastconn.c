/*
 * algo_leastconn.c - fewest active connections relative to weight.
 *
 * Suits long and uneven connections, where round robin would keep sending
 * to a server stuck with slow clients. The counts are shared by all workers
 * (atomics in the pool), so each worker sees the others' load, a few
 * connections late at most.
 */
#include "bal_algo.h"

/* Ties are broken round robin without weights (nginx weighs them): the
 * scan starts where the previous pick of this cursor left off, so servers
 * with equal load take turns. Under real traffic ties are short-lived,
 * since each pick adds to the winner's count; they matter mostly when the
 * pool is idle, where taking turns is what an operator expects. */
int bal_algo_leastconn_pick(const struct bal_pool *p, struct bal_cursor *c,
                            const uint32_t *tried, size_t ntried)
{
    size_t n = p->nservers;
    size_t i = c->lc_next < n ? c->lc_next : 0;
    uint64_t best_active = 0, best_weight = 1;
    int best = -1;

    for (size_t k = 0; k < n; k++, i = (i + 1 == n) ? 0 : i + 1) {
        uint64_t active, weight;

        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        active = atomic_load_explicit(&p->servers[i].live->active_connections,
                                      memory_order_relaxed) + 1;
        weight = bal_server_weight(p, i);
        /* (active + 1)/weight, as HAProxy compares: with active alone a
         * server at 0 would win whatever its weight, and one ramping up
         * (slow start) would take every new connection while it has none.
         * Without a division, in 128 bits: a weight of 2^32 times a share
         * of 1000 times 2^32 connections would not fit in 64. */
        if (best < 0 || (unsigned __int128)active * best_weight <
                            (unsigned __int128)best_active * weight) {
            best = (int)i;
            best_active = active;
            best_weight = weight;
        }
    }
    if (best >= 0)
        c->lc_next = ((size_t)best + 1 == n) ? 0 : (size_t)best + 1;
    return best;
}
