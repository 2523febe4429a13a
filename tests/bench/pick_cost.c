/*
 * pick_cost.c - what one pick costs, per algorithm, as a pool grows: the
 * balancer's own code (libbal.a), on one thread, every server in rotation
 * and no connection open, as a worker picks for a new connection
 * (bal_pick_attempt, its slot given back at once); and what building the
 * pool's tables costs (each reload that changes the pool pays it). Once
 * with every weight 1, once with weights 1 to 8 in turn ("-w1to8"). Built
 * and run by scale.py:
 *
 *   cc -O2 -Ibalancer tests/bench/pick_cost.c build/libbal.a -o pick_cost
 *   ./pick_cost 10 100 1000 10000 100000
 *
 * Prints "algo,servers,ns_per_pick,build_ms" lines: the best of 5 runs of
 * picks for about 0.2 s each, and of 3 builds (the least disturbed by the
 * machine).
 */
#include <stdbool.h>
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
measure(enum bal_algo algo, size_t n, bool is_weighted, double *build_ms)
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
        weights[i] = is_weighted ? 1 + (uint32_t)(i % 8) : 1;
        if ((names[i] = malloc(24)) == NULL)
            exit(1);
        snprintf(names[i], 24, "s%zu", i);
    }
    *build_ms = 1e18;
    for (int run = 0; run < 3; run++) {
        double t0 = now_ns();

        p = bal_pool_new(algo, n, weights, (const char *const *)names);
        if (p == NULL)
            exit(1);
        if ((now_ns() - t0) / 1e6 < *build_ms)
            *build_ms = (now_ns() - t0) / 1e6;
        if (run < 2)
            bal_pool_free(p);
    }
    c = bal_cursor_new(p, 42);
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
    printf("algo,servers,ns_per_pick,build_ms\n");
    for (int w = 0; w < 2; w++) {
        for (int a = 0; a < 4; a++) {
            for (int i = 1; i < argc; i++) {
                size_t n = strtoul(argv[i], NULL, 10);
                double build_ms, ns = measure((enum bal_algo)a, n, w == 1, &build_ms);

                printf("%s%s,%zu,%.1f,%.2f\n", algo_names[a], w == 1 ? "-w1to8" : "", n, ns,
                       build_ms);
                fflush(stdout);
            }
        }
    }
    return 0;
}
