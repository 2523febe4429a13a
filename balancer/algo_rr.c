/*
 * algo_rr.c - smooth weighted round robin, as nginx does it
 * (ngx_stream_upstream_round_robin.c, ngx_stream_upstream_get_peer).
 *
 * Each pick adds every eligible server's weight to its current weight, takes
 * the largest, and takes the total back from the winner. Over one cycle each
 * server is picked weight times, and the picks of a heavy server are spread
 * between the others (5,1,1 gives a a b a c a a) instead of arriving in a
 * burst, so a freshly added heavy server does not get weight connections in
 * a row.
 */
#include "bal_algo.h"

/* Servers out of rotation or tried keep their current weight frozen, as in
 * nginx: when they come back they resume where they were instead of
 * receiving a catch-up burst. */
int bal_algo_rr_pick(const struct bal_pool *p, struct bal_cursor *c,
                     const uint32_t *tried, size_t ntried)
{
    size_t n = p->nservers;
    size_t i = c->rr_start;
    int64_t total = 0;
    int best = -1;

    for (size_t k = 0; k < n; k++, i = (i + 1 == n) ? 0 : i + 1) {
        int64_t w;

        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        w = (int64_t)bal_server_weight(p, i);
        c->current_weight[i] += w;
        total += w;
        /* Strictly greater: ties go to the first server from rr_start,
         * which is what makes seed 0 reproduce nginx's sequence. */
        if (best < 0 || c->current_weight[i] > c->current_weight[best])
            best = (int)i;
    }
    if (best >= 0)
        c->current_weight[best] -= total;
    return best;
}
