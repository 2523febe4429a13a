/*
 * algo_contract_test.c - what every algorithm keeps, run through all four
 * from one table: an empty pool gives nothing; a lone server is picked
 * whatever its load; a server out of rotation or already tried is never
 * picked, and one back in rotation is again; picks follow the weights;
 * a server is weighed by its weight times its share (bal_live.share:
 * warn_weight, slow start). What
 * each algorithm does beyond that is in its own algo_*_test.c.
 */
#include <stdint.h>
#include <stdio.h>

#include "algo_fixture.h"

/* The weights' tolerance, of 100,000 picks over weights 1, 2, 3, 4
 * (connections that stay open): round robin is exact; leastconn up
 * to a tie; source and random are random, and one point (1000) is about
 * ten standard deviations. */
struct algo_row {
    enum bal_algo algo;
    const char *name;
    int weight_tolerance;
};

static const struct algo_row algos[] = {
    { BAL_ALGO_ROUNDROBIN, "roundrobin", 0 },
    { BAL_ALGO_LEASTCONN, "leastconn", 1 },
    { BAL_ALGO_SOURCE, "source", 1000 },
    { BAL_ALGO_RANDOM, "random", 1000 },
};

static void
contract_empty(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    struct bal_pool *p = algo_pool(algo, 0, NULL);
    struct bal_cursor *c = bal_cursor_new(p, 0);
    bool is_again = false;

    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), NULL, 0), -1);
    CHECK_EQ_INT(bal_pick_attempt(p, c, algo_client(1), NULL, 0, &is_again), BAL_PICK_NONE);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* A lone server, however loaded; none once tried or out of rotation. */
static void
contract_single(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    static const uint32_t w[] = {3};
    struct bal_pool *p = algo_pool(algo, 1, w);
    struct bal_cursor *c = bal_cursor_new(p, 9);
    uint32_t tried = 0;
    int count[1] = {0};

    algo_set_active(p, 0, 1000);
    algo_count_picks(p, c, 100, NULL, 0, false, count);
    CHECK_EQ_INT(count[0], 100);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), &tried, 1), -1);
    bal_server_set_in_rotation(p, 0, false);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), NULL, 0), -1);
    bal_server_set_in_rotation(p, 0, true);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), NULL, 0), 0);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* One server in rotation of two takes every pick, however loaded. */
static void
contract_one_eligible(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    static const uint32_t w[] = {3, 1};
    struct bal_pool *p = algo_pool(algo, 2, w);
    struct bal_cursor *c = bal_cursor_new(p, 1);
    int count[2] = {0};

    algo_set_active(p, 1, 50);
    bal_server_set_in_rotation(p, 0, false);
    algo_count_picks(p, c, 100, NULL, 0, false, count);
    CHECK_EQ_INT(count[1], 100);
    bal_server_set_in_rotation(p, 1, false);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), NULL, 0), -1);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Out of rotation: never picked, and the others all are; back in: picked
 * again. The connections stay open, so leastconn spreads them too. */
static void
contract_rotation(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    static const uint32_t w[] = {1, 2, 3, 4};
    struct bal_pool *p = algo_pool(algo, 4, w);
    struct bal_cursor *c = bal_cursor_new(p, 5);
    int count[4] = {0};

    bal_server_set_in_rotation(p, 2, false);
    algo_count_picks(p, c, 4000, NULL, 0, true, count);
    CHECK_EQ_INT(count[2], 0);
    CHECK(count[0] > 0 && count[1] > 0 && count[3] > 0);
    bal_server_set_in_rotation(p, 2, true);
    count[2] = 0;
    algo_count_picks(p, c, 4000, NULL, 0, true, count);
    CHECK(count[2] > 0);
    for (size_t i = 0; i < 4; i++)
        bal_server_set_in_rotation(p, i, false);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), NULL, 0), -1);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Tried: never picked again by that connection; all tried, or tried and
 * out of rotation together, leave nothing. Connections stay open. */
static void
contract_tried(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    static const uint32_t w[] = {1, 2, 3, 4};
    static const uint32_t tried[] = {3, 1};
    static const uint32_t tried_3[] = {0, 1, 2};
    static const uint32_t all[] = {0, 1, 2, 3};
    struct bal_pool *p = algo_pool(algo, 4, w);
    struct bal_cursor *c = bal_cursor_new(p, 5);
    int count[4] = {0};

    algo_count_picks(p, c, 4000, tried, 2, true, count);
    CHECK_EQ_INT(count[1], 0);
    CHECK_EQ_INT(count[3], 0);
    CHECK(count[0] > 0 && count[2] > 0);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), all, 4), -1);
    bal_server_set_in_rotation(p, 3, false);
    CHECK_EQ_INT(bal_pick(p, c, algo_client(1), tried_3, 3), -1);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* 10%, 20%, 30%, 40% of the picks, within the algorithm's tolerance. */
static void
contract_weights(const struct algo_row *row)
{
    enum bal_algo algo = row->algo;
    static const uint32_t w[] = {1, 2, 3, 4};
    struct bal_pool *p = algo_pool(algo, 4, w);
    struct bal_cursor *c = bal_cursor_new(p, 3);
    int count[4] = {0}, tolerance = row->weight_tolerance;
    algo_count_picks(p, c, 100000, NULL, 0, true, count);
    for (int i = 0; i < 4; i++) {
        CHECK(count[i] >= 10000 * (i + 1) - tolerance);
        CHECK(count[i] <= 10000 * (i + 1) + tolerance);
    }
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Four servers of weight 2 at these shares, n picks: the counts. */
static void
count_shares(enum bal_algo algo, const uint32_t *shares, int n, bool is_held, int *count)
{
    static const uint32_t w[] = {2, 2, 2, 2};
    struct bal_pool *p = algo_pool(algo, 4, w);
    struct bal_cursor *c = bal_cursor_new(p, 11);

    for (size_t i = 0; i < 4; i++) {
        bal_server_set_share(p, i, shares[i]);
        count[i] = 0;
    }
    algo_count_picks(p, c, n, NULL, 0, is_held, count);
    bal_cursor_free(c);
    bal_pool_free(p);
}

/* Server d at a quarter (a warning server at warn_weight = 25%): it gets
 * 1/13 of the picks (0.25 / 3.25), the others 4/13 each. */
static void
share_quarter(enum bal_algo algo, bool is_held, int tolerance)
{
    static const uint32_t shares[] = {BAL_SHARE_FULL, BAL_SHARE_FULL, BAL_SHARE_FULL,
                                      BAL_SHARE_FULL / 4};
    int count[4], n = 13000;

    count_shares(algo, shares, n, is_held, count);
    for (int i = 0; i < 3; i++)
        CHECK(count[i] >= 4000 - tolerance && count[i] <= 4000 + tolerance);
    CHECK(count[3] >= 1000 - tolerance && count[3] <= 1000 + tolerance);
    if (count[3] < 1000 - tolerance || count[3] > 1000 + tolerance)
        fprintf(stderr, "  d got %d of %d\n", count[3], n);
}

/* A server ramping up (slow start), at 1%, with no connections yet: it
 * must not take every new connection (the trap of comparing active counts
 * alone), only about its share. */
static void
share_cold(enum bal_algo algo, bool is_held, int max)
{
    static const uint32_t shares[] = {BAL_SHARE_FULL, BAL_SHARE_FULL, BAL_SHARE_FULL,
                                      BAL_SHARE_FULL / 100};
    int count[4];

    count_shares(algo, shares, 3010, is_held, count);
    CHECK(count[3] <= max);
    if (count[3] > max)
        fprintf(stderr, "  the cold server got %d of 3010\n", count[3]);
}

static const char *
algo_name(enum bal_algo algo)
{
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        if (algos[i].algo == algo)
            return algos[i].name;
    }
    return "?";
}

/* Says which algorithm broke a contract that has just failed. */
static void
blame(int failures_before, const char *contract, enum bal_algo algo)
{
    if (check_failures != failures_before)
        fprintf(stderr, "  ^ %s, balance %s\n", contract, algo_name(algo));
}

int
main(void)
{
    static const struct {
        const char *name;
        void (*run)(const struct algo_row *row);
    } contracts[] = {
        { "empty", contract_empty },
        { "single", contract_single },
        { "one eligible", contract_one_eligible },
        { "rotation", contract_rotation },
        { "tried", contract_tried },
        { "weights", contract_weights },
    };
    /* Leastconn with connections that stay is exact up to a tie; round
     * robin keeps a turn with probability share, and random and source
     * are random (1000 picks expected: three standard deviations are about
     * 90; 10 for the cold server, three are about 10). Leastconn with
     * short connections (all at 0) and random with held ones are the
     * cases where a cold server could take everything. */
    static const struct {
        enum bal_algo algo;
        bool is_held;
        int quarter_tolerance;          /* -1: not run */
        int cold_max;
    } shares[] = {
        { BAL_ALGO_ROUNDROBIN, false, 150, 20 },
        { BAL_ALGO_LEASTCONN, true, 2, 11 },
        { BAL_ALGO_LEASTCONN, false, -1, 11 },
        { BAL_ALGO_RANDOM, true, 150, 40 },
        { BAL_ALGO_RANDOM, false, 150, -1 },
        { BAL_ALGO_SOURCE, false, 150, 40 },
    };

    for (size_t k = 0; k < sizeof(contracts) / sizeof(contracts[0]); k++) {
        for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
            int before = check_failures;

            contracts[k].run(&algos[a]);
            blame(before, contracts[k].name, algos[a].algo);
        }
    }
    for (size_t k = 0; k < sizeof(shares) / sizeof(shares[0]); k++) {
        int before = check_failures;

        if (shares[k].quarter_tolerance >= 0)
            share_quarter(shares[k].algo, shares[k].is_held, shares[k].quarter_tolerance);
        blame(before, shares[k].is_held ? "share quarter, held" : "share quarter", shares[k].algo);
        before = check_failures;
        if (shares[k].cold_max >= 0)
            share_cold(shares[k].algo, shares[k].is_held, shares[k].cold_max);
        blame(before, shares[k].is_held ? "share cold, held" : "share cold", shares[k].algo);
    }
    return CHECK_DONE();
}
