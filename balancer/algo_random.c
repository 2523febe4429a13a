/*
 * algo_random.c - power of two random choices, weighted.
 *
 * Draw two distinct eligible servers, each with probability proportional to
 * its weight, and keep the one with fewer active connections per weight.
 * Unlike leastconn it does not send every new connection of every worker to
 * the same least loaded server while the shared counts lag, and unlike
 * round robin it still steers away from a loaded server: a server is picked
 * only when it is not the busier of the two drawn, so a server busier than
 * all others is never picked while another one is eligible.
 */
#include "bal_algo.h"

/* splitmix64 as a generator: any state, 0 included, gives a full-period
 * stream, so the seed needs no conditioning. */
static uint64_t bal_random_next(struct bal_cursor *c)
{
    c->rng += UINT64_C(0x9e3779b97f4a7c15);
    return bal_mix64(c->rng);
}

/* Walks the eligible servers other than skip until r falls inside one's
 * weight. r must be below the eligible total weight minus skip's. */
static int bal_random_draw(const struct bal_pool *p, uint64_t r, int skip,
                           const uint32_t *tried, size_t ntried)
{
    int last = -1;

    for (size_t i = 0; i < p->nservers; i++) {
        uint64_t w;

        if ((int)i == skip || !bal_server_eligible(p, i, tried, ntried))
            continue;
        w = bal_server_weight(p, i);
        if (r < w)
            return (int)i;
        r -= w;
        last = (int)i;
    }
    /* Only when main changed a rotation flag or a share between the sum
     * and this walk: the last eligible server then stands in. */
    return last;
}

int bal_algo_random_pick(const struct bal_pool *p, struct bal_cursor *c,
                         const uint32_t *tried, size_t ntried)
{
    uint64_t total = 0, a_active, b_active, a_weight, b_weight;
    size_t eligible = 0;
    int a, b;

    for (size_t i = 0; i < p->nservers; i++) {
        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        total += bal_server_weight(p, i);
        eligible++;
    }
    if (eligible == 0)
        return -1;

    /* The modulo bias is total / 2^64, far below anything measurable. */
    a = bal_random_draw(p, bal_random_next(c) % total, -1, tried, ntried);
    /* Main may take a server out of rotation, or change a share, between
     * the sum and the walk: the walk then stops at the last eligible
     * server. */
    if (a < 0 || eligible == 1)
        return a;
    a_weight = bal_server_weight(p, a);
    /* The same race can make a a server the sum did not count, or one
     * grown since; then the remaining weight may be 0, which must not
     * reach the modulo. */
    if (a_weight >= total)
        return a;
    b = bal_random_draw(p, bal_random_next(c) % (total - a_weight), a, tried, ntried);
    if (b < 0)
        return a;

    a_active = atomic_load_explicit(&p->servers[a].live->active_connections,
                                    memory_order_relaxed);
    b_active = atomic_load_explicit(&p->servers[b].live->active_connections,
                                    memory_order_relaxed);
    b_weight = bal_server_weight(p, b);
    /* b_active/b_weight < a_active/a_weight; ties keep the first draw, so
     * with equal loads the pick follows the weights exactly. A server with
     * a small share (warning, slow start) is drawn that much less often,
     * which is what keeps one ramping up, with no connections yet, from
     * winning every comparison it is in. In 128 bits, as leastconn. */
    return (unsigned __int128)b_active * a_weight < (unsigned __int128)a_active * b_weight ? b
                                                                                         : a;
}
