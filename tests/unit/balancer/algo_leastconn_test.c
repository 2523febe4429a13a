/*
 * algo_leastconn_test.c - tests balancer/algo_leastconn.c: fewest active
 * connections per weight, ties taking turns.
 */
#include <stdint.h>

#include "algo_fixture.h"

static struct bal_pool *pool(size_t n, const uint32_t *w)
{
    return algo_pool(BAL_ALGO_LEASTCONN, n, w);
}

static void test_relative_to_weight(void)
{
    static const uint32_t w[] = {1, 2, 4};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);

    /* (3+1)/1 > (5+1)/2 > (9+1)/4: the most connections, yet the least
     * loaded. */
    algo_set_active(p, 0, 3);
    algo_set_active(p, 1, 5);
    algo_set_active(p, 2, 9);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 2);
    /* (3+1)/1 < (8+1)/2 < (18+1)/4. */
    algo_set_active(p, 1, 8);
    algo_set_active(p, 2, 18);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 0);
    /* Out of rotation or tried, the least loaded is passed over for the
     * next least loaded. */
    bal_server_set_in_rotation(p, 0, false);
    CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 1);
    bal_server_set_in_rotation(p, 0, true);
    {
        static const uint32_t tried[] = {0};
        static const uint32_t all[] = {0, 1, 2};

        CHECK_EQ_INT(bal_pick(p, c, 0, tried, 1), 1);
        CHECK_EQ_INT(bal_pick(p, c, 0, all, 3), -1);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Products of two 32-bit figures and a share need more than 64 bits:
 * (3e9+1)/4e9 is about 0.75. */
static void test_no_overflow(void)
{
    static const uint32_t w[] = {4000000000u, 2};
    struct bal_pool *p = pool(2, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);

    algo_set_active(p, 0, 3000000000u);
    algo_set_active(p, 1, 0);    /* (0+1)/2 < 0.75 */
    for (int k = 0; k < 3; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 1);
    algo_set_active(p, 1, 1);    /* 0.75 < (1+1)/2 */
    for (int k = 0; k < 3; k++)
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 0);
    bal_cursor_free(c);
    bal_pool_free(p);
}

static void test_ties_take_turns(void)
{
    static const uint32_t w[] = {1, 1, 1, 1};
    struct bal_pool *p = pool(4, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    char out[16];

    /* Idle pool of equal weights: all tie. */
    algo_picks(p, c, 8, NULL, 0, out);
    CHECK_EQ_STR(out, "abcdabcd");

    /* a and c tie at the bottom, b and d are busier. */
    algo_set_active(p, 1, 5);
    algo_set_active(p, 3, 15);
    algo_picks(p, c, 6, NULL, 0, out);
    CHECK_EQ_STR(out, "acacac");
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Connections that never end pile up in proportion to the weights, and
 * each new one goes where the ratio is lowest. */
static void test_distribution(void)
{
    static const uint32_t w[] = {1, 3, 6};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 2);
    int count[3] = {0};

    algo_count_picks(p, c, 10000, NULL, 0, true, count);
    CHECK(count[0] >= 999 && count[0] <= 1001);
    CHECK(count[1] >= 2999 && count[1] <= 3001);
    CHECK(count[2] >= 5999 && count[2] <= 6001);

    /* Server b sheds 300 connections: it gets the next 300 picks. */
    for (int k = 0; k < 300; k++)
        bal_server_conn_end(p, 1);
    for (int k = 0; k < 300; k++) {
        int i = bal_pick(p, c, 0, NULL, 0);

        CHECK_EQ_INT(i, 1);
        bal_server_conn_start(p, 1);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* A server out of rotation gets nothing however idle; back in, it takes
 * every pick until it has caught up with the others. */
static void test_rotation(void)
{
    static const uint32_t w[] = {1, 1, 1};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    int count[3] = {0};

    bal_server_set_in_rotation(p, 1, false);
    algo_count_picks(p, c, 100, NULL, 0, true, count);
    CHECK_EQ_INT(count[1], 0);
    CHECK_EQ_INT(count[0], 50);
    bal_server_set_in_rotation(p, 1, true);
    for (int k = 0; k < 50; k++) {
        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), 1);
        bal_server_conn_start(p, 1);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Ties go to the server picked longest ago, whichever worker picked it:
 * idle workers, one pick each, take turns over the pool. */
static void test_turns_across_workers(void)
{
    static const uint32_t w[] = {1, 1, 1};
    struct bal_pool *p = pool(3, w);

    for (uint64_t seed = 0; seed < 6; seed++) {
        struct bal_cursor *c = bal_cursor_new(p, 5 - seed);

        CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), (int)(seed % 3));
        bal_cursor_free(c);
    }
    bal_pool_free(p);
}

int main(void)
{
    test_relative_to_weight();
    test_no_overflow();
    test_ties_take_turns();
    test_distribution();
    test_rotation();
    test_turns_across_workers();
    return CHECK_DONE();
}
