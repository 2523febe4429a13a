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
    for (size_t i = 0; i < p->nservers; i++) {
        if ((int)i == skip || !bal_server_eligible(p, i, tried, ntried))
            continue;
        if (r < p->servers[i].weight)
            return (int)i;
        r -= p->servers[i].weight;
    }
    return -1;   /* unreachable while rotation is stable during the pick */
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
        total += p->servers[i].weight;
        eligible++;
    }
    if (eligible == 0)
        return -1;

    /* The modulo bias is total / 2^64, far below anything measurable. */
    a = bal_random_draw(p, bal_random_next(c) % total, -1, tried, ntried);
    /* Main may take a server out of rotation between the sum and the walk;
     * the walk then runs off the end and we fall back on whatever was
     * found. */
    if (a < 0 || eligible == 1)
        return a;
    /* The same race can make a a server the sum did not count; then the
     * remaining weight may be 0, which must not reach the modulo. */
    if (p->servers[a].weight >= total)
        return a;
    b = bal_random_draw(p, bal_random_next(c) % (total - p->servers[a].weight),
                        a, tried, ntried);
    if (b < 0)
        return a;

    a_active = atomic_load_explicit(&p->servers[a].live->active_connections,
                                    memory_order_relaxed);
    b_active = atomic_load_explicit(&p->servers[b].live->active_connections,
                                    memory_order_relaxed);
    a_weight = p->servers[a].weight;
    b_weight = p->servers[b].weight;
    /* b_active/b_weight < a_active/a_weight; ties keep the first draw, so
     * with equal loads the pick follows the weights exactly. */
    return b_active * a_weight < a_active * b_weight ? b : a;
}
