/*
 * algo_rr_test.c - tests balancer/algo_rr.c: weighted round robin over a
 * precomputed schedule.
 */
#include <stdint.h>

#include "algo_fixture.h"

static struct bal_pool *pool(size_t n, const uint32_t *w)
{
    return algo_pool(BAL_ALGO_ROUNDROBIN, n, w);
}

/* Weights 5,1,1: a's five turns spread between b's and c's (never more
 * than three in a row, the cycle's end included), the same every cycle. */
static void test_spread(void)
{
    static const uint32_t w[] = {5, 1, 1};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    char out[32];

    algo_picks(p, c, 21, NULL, 0, out);
    CHECK_EQ_STR(out, "abaaaca" "abaaaca" "abaaaca");
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Weights with a common factor are reduced by it: 20,10 is 2,1, a cycle
 * of three. Weights that would need a cycle over 64 turns a server are
 * scaled down, each server keeping at least one. */
static void test_reduced(void)
{
    static const uint32_t w[] = {20, 10};
    static const uint32_t wide[] = {100000, 1};
    struct bal_pool *p = pool(2, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    int count[2] = {0};

    CHECK_EQ_INT((int)p->schedule_len, 3);
    bal_cursor_free(c);
    bal_pool_free(p);
    p = pool(2, wide);
    c = bal_cursor_new(p, 0);
    CHECK_EQ_INT((int)p->schedule_len, 128);
    algo_count_picks(p, c, 1280, NULL, 0, false, count);
    CHECK_EQ_INT(count[0], 1270);
    CHECK_EQ_INT(count[1], 10);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* The workers share one rotation: cursors taking turns at picking still
 * give every server its turn, in order. */
static void test_one_rotation(void)
{
    static const uint32_t w[] = {1, 1, 1};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c[3] = { bal_cursor_new(p, 0), bal_cursor_new(p, 1), bal_cursor_new(p, 2) };
    char out[8];

    for (int k = 0; k < 6; k++)
        out[k] = (char)('a' + bal_pick(p, c[k % 2 == 0 ? 0 : k % 3], 0, NULL, 0));
    out[6] = '\0';
    CHECK_EQ_STR(out, "abcabc");
    for (int k = 0; k < 3; k++)
        bal_cursor_free(c[k]);
    bal_pool_free(p);
}

static void test_rotation(void)
{
    static const uint32_t w[] = {2, 1, 1};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    int count[3] = {0};
    char out[16];

    bal_server_set_in_rotation(p, 0, false);
    algo_picks(p, c, 8, NULL, 0, out);
    CHECK_EQ_STR(out, "bcbcbcbc");

    bal_server_set_in_rotation(p, 2, false);
    algo_picks(p, c, 3, NULL, 0, out);
    CHECK_EQ_STR(out, "bbb");

    bal_server_set_in_rotation(p, 1, false);
    CHECK_EQ_INT(bal_pick(p, c, 0, NULL, 0), -1);

    bal_server_set_in_rotation(p, 0, true);
    bal_server_set_in_rotation(p, 1, true);
    bal_server_set_in_rotation(p, 2, true);
    algo_count_picks(p, c, 400, NULL, 0, false, count);
    CHECK_EQ_INT(count[0], 200);
    CHECK_EQ_INT(count[1], 100);
    CHECK_EQ_INT(count[2], 100);
    bal_cursor_free(c);
    bal_pool_free(p);
}

static void test_tried(void)
{
    static const uint32_t w[] = {5, 1, 1};
    static const uint32_t tried_a[] = {0};
    static const uint32_t tried_ab[] = {1, 0};
    static const uint32_t tried_all[] = {2, 0, 1};
    struct bal_pool *p = pool(3, w);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    char out[16];

    int count[3] = {0};
    char first[8];

    /* Retries are drawn by weight among the others (3 standard deviations
     * of 600 draws are 37), and leave the rotation where it was. */
    algo_picks(p, c, 3, NULL, 0, first);
    algo_count_picks(p, c, 600, tried_a, 1, false, count);
    CHECK_EQ_INT(count[0], 0);
    CHECK(count[1] > 300 - 50 && count[1] < 300 + 50);
    algo_picks(p, c, 4, NULL, 0, out);
    CHECK_EQ_STR(first, "aba");
    CHECK_EQ_STR(out, "aaca");
    algo_picks(p, c, 3, tried_ab, 2, out);
    CHECK_EQ_STR(out, "ccc");
    CHECK_EQ_INT(bal_pick(p, c, 0, tried_all, 3), -1);

    /* Tried and out of rotation together leave nothing. */
    bal_server_set_in_rotation(p, 2, false);
    CHECK_EQ_INT(bal_pick(p, c, 0, tried_ab, 2), -1);
    bal_cursor_free(c);
    bal_pool_free(p);
}

int main(void)
{
    test_spread();
    test_reduced();
    test_one_rotation();
    test_rotation();
    test_tried();
    return CHECK_DONE();
}
