/*
 * pick_cost.c - what one pick costs, per algorithm, as a pool grows: the
 * balancer's own code (libbal.a), on one thread, every server in rotation
 * with weight 1 and no connection open, as a worker picks for a new
 * connection (bal_pick_attempt, its slot given back at once). Built and
 * run by scale.py:
 *
 *   cc -O2 -Ibalancer tests/bench/pick_cost.c build/libbal.a -o pick_cost
 *   ./pick_cost 10 100 1000 10000 100000
 *
 * Prints "algo,servers,ns_per_pick" lines: the best of 5 runs of picks for
 * about 0.2 s each (the least disturbed by the machine).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bal.h"

static const char *const algo_names[] = { "roundrobin", "leastconn", "source", "random" };

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double
measure(enum bal_algo algo, size_t n)
{
    uint32_t *weights = malloc(n * sizeof(*weights));
    char **names = malloc(n * sizeof(*names));
    struct bal_pool *p;
    struct bal_cursor *c;
    double best = 1e18;
    uint64_t sink = 0;

    if (weights == NULL || names == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        weights[i] = 1;
        if ((names[i] = malloc(24)) == NULL)
            exit(1);
        snprintf(names[i], 24, "s%zu", i);
    }
    p = bal_pool_new(algo, n, weights, (const char *const *)names);
    c = p != NULL ? bal_cursor_new(p, 42) : NULL;
    if (c == NULL)
        exit(1);
    for (int run = 0; run < 5; run++) {
        size_t picks = 0;
        double t0 = now_ns(), t;

        do {
            for (int k = 0; k < 1000; k++) {
                bool again;
                /* a new client each time: the source hash moves */
                uint64_t client = bal_hash_bytes(&picks, sizeof(picks));
                int i = bal_pick_attempt(p, c, client, NULL, 0, &again);

                if (i >= 0)
                    bal_server_conn_end(p, (size_t)i);
                sink += (uint64_t)i;
                picks++;
            }
            t = now_ns();
        } while (t - t0 < 2e8);
        if ((t - t0) / (double)picks < best)
            best = (t - t0) / (double)picks;
    }
    if (sink == 42)
        fputc('\n', stderr);            /* keeps the picks from being optimised away */
    bal_cursor_free(c);
    bal_pool_free(p);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(weights);
    return best;
}

int
main(int argc, char **argv)
{
    printf("algo,servers,ns_per_pick\n");
    for (int a = 0; a < 4; a++) {
        for (int i = 1; i < argc; i++) {
            size_t n = strtoul(argv[i], NULL, 10);

            printf("%s,%zu,%.1f\n", algo_names[a], n, measure((enum bal_algo)a, n));
            fflush(stdout);
        }
    }
    return 0;
}
