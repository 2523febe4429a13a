/*
 * algo_rr.c - weighted round robin over a schedule computed once per pool.
 *
 * nginx's smooth weighted round robin visits every server on every pick,
 * O(n): 265 us a pick at 100,000 servers. Here the order is computed when
 * the pool is built (its weights never change) and the workers walk it
 * with one shared cursor (an atomic counter: the totals follow the weights
 * whichever worker takes a connection, as HAProxy's one rotation per
 * backend), O(1) a pick. Equal weights, the common case, need no schedule
 * at all: slot j is server j. Other weights get a stride schedule
 * (the virtual finish times of weighted fair queueing): server i's k-th
 * turn comes at (k + phase_i) / weight_i, so that a heavy server's turns
 * are spread between the others' (5,1,1 gives a b a a a c a) rather than
 * arriving in a burst; the phases, spread by the golden ratio, keep servers
 * of one weight from all falling due at the same moment.
 *
 * What changes while workers pick is applied at the pick:
 *   - a server out of rotation, at its cap or already tried loses its turn
 *     to the next slot, so over a cycle each eligible server is picked
 *     exactly weight times, and one coming back resumes its turns without
 *     a catch-up burst;
 *   - a server below its full share (warning, slow start) keeps that
 *     share of its turns; a turn it gives up goes to a weighted random
 *     draw (draw.c) over all, itself included, which makes the picks
 *     proportional to weight * share (the next slot's server would get
 *     more than its part: with two servers, one at 50%, 1 in 4 instead of
 *     1 in 3);
 *   - a connection's retry is such a draw too, among the servers it has
 *     not tried.
 */
#include <stdlib.h>

#include "bal_algo.h"

/* The schedule holds at most this many turns per server on average: above
 * it the weights are scaled down (each keeps at least 1 turn), which
 * rounds ratios beyond 64 to 1 between servers of very different weights. */
#define BAL_RR_TURNS_PER_SERVER 64

struct bal_rr_turn {
    double due;
    uint32_t server;
};

static bool bal_rr_turn_before(const struct bal_rr_turn *x, const struct bal_rr_turn *y)
{
    return x->due < y->due || (x->due == y->due && x->server < y->server);
}

/* Sorts the len turns (due in [0, 1)) into out by due time, then server:
 * a counting sort into len buckets of equal width, then insertion within
 * each (one turn on average), O(len) where qsort took 100 ms for 450,000
 * turns. */
static bool bal_rr_sort(const struct bal_rr_turn *turns, size_t len, struct bal_rr_turn *out)
{
    size_t *start = calloc(len + 1, sizeof(*start));

    if (start == NULL)
        return false;
    for (size_t j = 0; j < len; j++)
        start[(size_t)(turns[j].due * (double)len) + 1]++;
    for (size_t b = 1; b <= len; b++)
        start[b] += start[b - 1];
    for (size_t j = 0; j < len; j++) {
        size_t b = (size_t)(turns[j].due * (double)len);
        size_t at = start[b]++;

        /* start[b] now ends bucket b's filled part; slide the turn down
         * past the later ones of its bucket. */
        while (at > 0 && (size_t)(out[at - 1].due * (double)len) == b &&
               bal_rr_turn_before(&turns[j], &out[at - 1])) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = turns[j];
    }
    free(start);
    return true;
}

static uint64_t bal_gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;

        a = b;
        b = t;
    }
    return a;
}

bool bal_algo_rr_build(struct bal_pool *p)
{
    size_t n = p->nservers, len = 0, cap = n * BAL_RR_TURNS_PER_SERVER;
    uint64_t g = 0, total = 0;
    struct bal_rr_turn *turns;
    uint64_t *turns_of;

    p->schedule_len = n;
    for (size_t i = 0; i < n; i++)
        g = bal_gcd(p->servers[i].weight, g);
    for (size_t i = 0; i < n; i++)
        total += p->servers[i].weight / g;
    p->rr_credit = calloc(n > 0 ? n : 1, sizeof(*p->rr_credit));
    if (p->rr_credit == NULL)
        return false;
    if (total == n)
        return true;    /* equal weights: the identity */

    turns_of = malloc(n * sizeof(*turns_of));
    if (turns_of == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = p->servers[i].weight / g;

        if (total > cap) {
            t = (uint64_t)((double)t * (double)cap / (double)total);
            t = t > 0 ? t : 1;
        }
        turns_of[i] = t;
        len += t;
    }
    turns = malloc(2 * len * sizeof(*turns));
    p->schedule = malloc(len * sizeof(*p->schedule));
    if (turns == NULL || p->schedule == NULL) {
        free(turns);
        free(turns_of);
        return false;
    }
    len = 0;
    for (size_t i = 0; i < n; i++) {
        /* The fractional part of (i + 1) times the golden ratio. */
        double phase = (double)(i + 1) * 0.6180339887498949;

        phase -= (double)(uint64_t)phase;
        for (uint64_t k = 0; k < turns_of[i]; k++)
            turns[len++] = (struct bal_rr_turn){ ((double)k + phase) / (double)turns_of[i],
                                                 (uint32_t)i };
    }
    free(turns_of);
    if (!bal_rr_sort(turns, len, turns + len)) {
        free(turns);
        return false;
    }
    for (size_t j = 0; j < len; j++)
        p->schedule[j] = turns[len + j].server;
    p->schedule_len = len;
    free(turns);
    return true;
}

/* A turn of server i, below its full share: kept once in every
 * BAL_SHARE_FULL / share turns, counted over all workers (Bresenham: 50%
 * keeps every other turn exactly, not half of them on average). The
 * credit wraps at 2^32, which is not a multiple of BAL_SHARE_FULL: one
 * turn in four million may be kept or given up out of step. */
static bool bal_rr_keeps_turn(const struct bal_pool *p, size_t i)
{
    uint32_t share = atomic_load_explicit(&p->servers[i].live->share, memory_order_relaxed);
    uint32_t before;

    if (share >= BAL_SHARE_FULL)
        return true;
    share = share > 0 ? share : 1;
    before = atomic_fetch_add_explicit(&p->rr_credit[i], share, memory_order_relaxed);
    return before % BAL_SHARE_FULL + share >= BAL_SHARE_FULL;
}

int bal_algo_rr_pick(const struct bal_pool *p, struct bal_cursor *c,
                     const uint32_t *tried, size_t ntried)
{
    size_t len = p->schedule_len;

    /* A retry draws among the servers not tried, by weight, and leaves the
     * cursor where it is: a dead server is still first in line for its
     * own part of the connections only, and their retries spread over all
     * the others rather than falling on the server after it. */
    if (ntried > 0) {
        int i = bal_draw(p, c, -1, tried, ntried);

        if (i >= 0)
            return i;
    }
    /* Turns come from the pool's one rotation, a skipped server's too, so
     * that the servers after it are not given its turns. */
    for (size_t k = 0; k < len; k++) {
        size_t slot = (size_t)(atomic_fetch_add_explicit(&((struct bal_pool *)p)->rr_next, 1,
                                                         memory_order_relaxed) % len);
        size_t i = p->schedule != NULL ? p->schedule[slot] : slot;
        int again;

        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        if (bal_rr_keeps_turn(p, i))
            return (int)i;
        /* Rarely fails (every draw hit servers out of reach): the turn's
         * own server stands in. */
        again = bal_draw(p, c, -1, tried, ntried);
        return again >= 0 ? again : (int)i;
    }
    return -1;
}
