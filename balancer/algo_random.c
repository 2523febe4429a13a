/*
 * algo_random.c - power of two random choices, weighted.
 *
 * Draw two distinct eligible servers, each with probability proportional to
 * its weight, and keep the one with fewer active connections per weight.
 * Unlike leastconn it does not send every new connection of every worker to
 * the same least loaded server while the shared counts lag, and unlike
 * round robin it still steers away from a loaded server: a server is picked
 * only when it is not the busier of the two drawn, so a server busier than
 * all others is never picked while another one is eligible. Each draw is
 * O(1) (draw.c), so a pick costs the same at 10 servers as at 100,000.
 */
#include "bal_algo.h"

/* The exact draw in O(n), for when draw.c's rejection gives up (most of
 * the pool's weight out of reach): walks the eligible servers other than
 * skip until r falls inside one's weight. r must be below the eligible
 * total weight minus skip's. */
static int bal_random_draw_linear(const struct bal_pool *p, uint64_t r, int skip,
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

/* draw.c's O(1) draw, or the linear one when it gives up. */
static int bal_random_choose(const struct bal_pool *p, struct bal_cursor *c, int skip,
                             const uint32_t *tried, size_t ntried)
{
    uint64_t total = 0;
    int i = bal_draw(p, c, skip, tried, ntried);

    if (i >= 0)
        return i;
    for (size_t j = 0; j < p->nservers; j++)
        if ((int)j != skip && bal_server_eligible(p, j, tried, ntried))
            total += bal_server_weight(p, j);
    if (total == 0)
        return -1;
    /* The modulo bias is total / 2^64, far below anything measurable. */
    return bal_random_draw_linear(p, bal_cursor_random(c) % total, skip, tried, ntried);
}

int bal_algo_random_pick(const struct bal_pool *p, struct bal_cursor *c,
                         const uint32_t *tried, size_t ntried)
{
    uint64_t a_active, b_active, a_weight, b_weight;
    int a = bal_random_choose(p, c, -1, tried, ntried), b;

    if (a < 0)
        return -1;
    b = bal_random_choose(p, c, a, tried, ntried);
    if (b < 0)
        return a;       /* a is the only one */

    a_active = atomic_load_explicit(&p->servers[a].live->active_connections,
                                    memory_order_relaxed);
    b_active = atomic_load_explicit(&p->servers[b].live->active_connections,
                                    memory_order_relaxed);
    a_weight = bal_server_weight(p, a);
    b_weight = bal_server_weight(p, b);
    /* b_active/b_weight < a_active/a_weight; ties keep the first draw, so
     * with equal loads the pick follows the weights exactly. A server with
     * a small share (warning, slow start) is drawn that much less often,
     * which is what keeps one ramping up, with no connections yet, from
     * winning every comparison it is in. In 128 bits, as leastconn. */
    return (unsigned __int128)b_active * a_weight < (unsigned __int128)a_active * b_weight ? b
                                                                                         : a;
}
