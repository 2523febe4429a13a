/*
 * algo_source.c - consistent hashing of the client address, by weighted
 * rendezvous hashing (highest random weight).
 *
 * Each server scores -weight / ln(u), where u in (0,1) is a hash of the
 * client and the server's id; the highest score wins. The winner is server
 * i with probability weight_i / total weight, and a server's score does not
 * depend on which other servers exist. Chosen over a Maglev or ring table
 * because:
 *   - when a server leaves rotation, exactly its clients move and no
 *     others (Maglev moves a few more), and they come back when it returns;
 *   - rotation changes need no table rebuild, so main flips in_rotation and
 *     workers see it on the next pick with no shared structure to publish;
 *   - a tried server is skipped naturally: the client gets its next-best
 *     server, the same on every retry;
 *   - weights are honoured exactly, without virtual nodes;
 *   - id_hash comes from the server's name, so clients stay put across
 *     reloads that reorder or add servers.
 * The price is O(n) per pick with a log() per eligible server, against
 * O(1) for a table lookup: fine for pools of tens or hundreds of servers.
 */
#include <math.h>

#include "bal_algo.h"

/* The top 53 bits of the mix, centred in their interval: u is never 0
 * (ln would be -inf) nor 1 (ln would be 0 and the score infinite). */
static double bal_source_unit(uint64_t client_hash, uint64_t id_hash)
{
    uint64_t x = bal_mix64(client_hash ^ id_hash);

    return ((double)(x >> 11) + 0.5) * 0x1.0p-53;
}

int bal_algo_source_pick(const struct bal_pool *p, uint64_t client_hash,
                         const uint32_t *tried, size_t ntried)
{
    double best_score = 0.0;
    int best = -1;

    for (size_t i = 0; i < p->nservers; i++) {
        const struct bal_server *s = &p->servers[i];
        double score;

        if (!bal_server_eligible(p, i, tried, ntried))
            continue;
        score = -(double)bal_server_weight(p, i) /
                log(bal_source_unit(client_hash, s->id_hash));
        /* Strictly greater: on an exact tie the lower index wins, the same
         * in every worker. */
        if (best < 0 || score > best_score) {
            best = (int)i;
            best_score = score;
        }
    }
    return best;
}
