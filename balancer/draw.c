/*
 * draw.c - a server drawn at random in proportion to its weight, in O(1):
 * Vose's alias method over the pool's configured weights.
 *
 * The table is built once with the pool (the weights never change). What
 * does change while workers pick (rotation, caps, shares) is applied by
 * rejection: a drawn server that is not eligible is drawn again, and one
 * with a share below full is kept with probability share. The result is
 * exactly a draw in proportion to weight * share among the eligible
 * servers, at a cost of 1 / (their part of the total weight) draws on
 * average: 1 with the whole pool in rotation, 10 with 90% of it out.
 */
#include <math.h>
#include <stdlib.h>

#include "bal_algo.h"

/* Column j keeps server j when the low 32 bits of the draw are below
 * cut[j], else gives alias[j]. */
#define BAL_CUT_ALL UINT32_MAX

bool bal_draw_build(struct bal_pool *p)
{
    size_t n = p->nservers, nsmall = 0, nlarge = 0;
    double total = 0.0, *scaled;
    uint32_t *small, *large;
    bool is_equal = true;

    for (size_t i = 0; i < n; i++) {
        total += p->servers[i].weight;
        is_equal = is_equal && p->servers[i].weight == p->servers[0].weight;
    }
    if (n == 0 || is_equal)
        return true;    /* the identity: column j is server j */

    p->alias_cut = malloc(n * sizeof(*p->alias_cut));
    p->alias_other = malloc(n * sizeof(*p->alias_other));
    scaled = malloc(n * sizeof(*scaled));
    small = malloc(n * sizeof(*small));
    large = malloc(n * sizeof(*large));
    if (p->alias_cut == NULL || p->alias_other == NULL || scaled == NULL ||
        small == NULL || large == NULL) {
        free(scaled);
        free(small);
        free(large);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        scaled[i] = (double)p->servers[i].weight * (double)n / total;
        if (scaled[i] < 1.0)
            small[nsmall++] = (uint32_t)i;
        else
            large[nlarge++] = (uint32_t)i;
    }
    while (nsmall > 0 && nlarge > 0) {
        uint32_t s = small[--nsmall], l = large[--nlarge];

        p->alias_cut[s] = (uint32_t)ldexp(scaled[s], 32);
        p->alias_other[s] = l;
        scaled[l] -= 1.0 - scaled[s];
        if (scaled[l] < 1.0)
            small[nsmall++] = l;
        else
            large[nlarge++] = l;
    }
    /* What is left is full up to rounding. */
    while (nlarge > 0) {
        uint32_t l = large[--nlarge];

        p->alias_cut[l] = BAL_CUT_ALL;
        p->alias_other[l] = l;
    }
    while (nsmall > 0) {
        uint32_t s = small[--nsmall];

        p->alias_cut[s] = BAL_CUT_ALL;
        p->alias_other[s] = s;
    }
    free(scaled);
    free(small);
    free(large);
    return true;
}

/* One draw by configured weight alone: the high half of r picks the
 * column (multiply and shift, no modulo), the low half the side. */
static size_t bal_draw_column(const struct bal_pool *p, uint64_t r)
{
    size_t j = (size_t)(((r >> 32) * (uint64_t)p->nservers) >> 32);

    if (p->alias_cut == NULL || (uint32_t)r < p->alias_cut[j] ||
        p->alias_cut[j] == BAL_CUT_ALL)
        return j;
    return p->alias_other[j];
}

uint64_t bal_cursor_random(struct bal_cursor *c)
{
    c->rng += UINT64_C(0x9e3779b97f4a7c15);
    return bal_mix64(c->rng);
}

bool bal_share_admits(const struct bal_pool *p, size_t i, uint64_t r)
{
    uint32_t share = atomic_load_explicit(&p->servers[i].live->share, memory_order_relaxed);

    /* 0 counts as 1 part, as in bal_server_weight: a server in rotation
     * is never left out entirely. */
    return share >= BAL_SHARE_FULL || (uint32_t)(r % BAL_SHARE_FULL) < (share > 0 ? share : 1);
}

int bal_draw(const struct bal_pool *p, struct bal_cursor *c, int skip,
             const uint32_t *tried, size_t ntried)
{
    for (int k = 0; k < BAL_DRAW_TRIES; k++) {
        size_t i = bal_draw_column(p, bal_cursor_random(c));

        if ((int)i == skip || !bal_server_eligible(p, i, tried, ntried))
            continue;
        if (bal_share_admits(p, i, bal_cursor_random(c)))
            return (int)i;
    }
    return -1;
}
