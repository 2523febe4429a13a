/*
 * share_test.c - tests that all four algorithms weigh a server by its
 * weight times its share (bal_live.share: warn_weight, slow start).
 */
#include <stdint.h>
#include <stdio.h>

#include "bal.h"
#include "check.h"

static const char *const names[] = {"a", "b", "c", "d"};

/* Picks n times, each pick a connection that never ends when is_held
 * (leastconn and random then see the load build up); returns the counts. */
static void
count_picks(enum bal_algo algo, const uint32_t *shares, int n, bool is_held, int *count)
{
    static const uint32_t w[] = {2, 2, 2, 2};
    struct bal_pool *p = bal_pool_new(algo, 4, w, names);
    struct bal_cursor *c = bal_cursor_new(p, 11);

    for (size_t i = 0; i < 4; i++) {
        bal_server_set_share(p, i, shares[i]);
        count[i] = 0;
    }
    for (int k = 0; k < n; k++) {
        uint64_t client = (uint64_t)k * 0x9e3779b97f4a7c15u;
        int i = bal_pick(p, c, client, NULL, 0);

        CHECK(i >= 0 && i < 4);
        if (i < 0 || i >= 4)
            continue;
        count[i]++;
        if (is_held)
            bal_server_conn_start(p, (size_t)i);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Server d at a quarter (a warning server at warn_weight = 25%): it gets
 * 1/13 of the picks (0.25 / 3.25), the others 4/13 each. */
static void
test_quarter(enum bal_algo algo, bool is_held, int tolerance)
{
    static const uint32_t shares[] = {BAL_SHARE_FULL, BAL_SHARE_FULL, BAL_SHARE_FULL,
                                      BAL_SHARE_FULL / 4};
    int count[4], n = 13000;

    count_picks(algo, shares, n, is_held, count);
    for (int i = 0; i < 3; i++)
        CHECK(count[i] >= 4000 - tolerance && count[i] <= 4000 + tolerance);
    CHECK(count[3] >= 1000 - tolerance && count[3] <= 1000 + tolerance);
    if (count[3] < 1000 - tolerance || count[3] > 1000 + tolerance)
        fprintf(stderr, "algo %d: d got %d of %d\n", (int)algo, count[3], n);
}

/* A server ramping up (slow start), at 1%, with no connections yet: it
 * must not take every new connection (the trap of comparing active counts
 * alone), only about its share. */
static void
test_cold(enum bal_algo algo, bool is_held, int max)
{
    static const uint32_t shares[] = {BAL_SHARE_FULL, BAL_SHARE_FULL, BAL_SHARE_FULL,
                                      BAL_SHARE_FULL / 100};
    int count[4];

    count_picks(algo, shares, 3010, is_held, count);
    CHECK(count[3] <= max);
    if (count[3] > max)
        fprintf(stderr, "algo %d: the cold server got %d of 3010\n", (int)algo, count[3]);
}

int
main(void)
{
    /* smooth round robin is exact; leastconn with connections that stay
     * is exact up to a tie; random and source are random (1000 picks
     * expected: three standard deviations are about 90) */
    test_quarter(BAL_ALGO_ROUNDROBIN, false, 1);
    test_quarter(BAL_ALGO_LEASTCONN, true, 2);
    test_quarter(BAL_ALGO_RANDOM, true, 150);
    test_quarter(BAL_ALGO_RANDOM, false, 150);
    test_quarter(BAL_ALGO_SOURCE, false, 150);
    test_cold(BAL_ALGO_ROUNDROBIN, false, 11);
    test_cold(BAL_ALGO_LEASTCONN, true, 11);
    test_cold(BAL_ALGO_LEASTCONN, false, 11);      /* short connections: all at 0 */
    test_cold(BAL_ALGO_RANDOM, true, 40);
    test_cold(BAL_ALGO_SOURCE, false, 40);
    return CHECK_DONE();
}
