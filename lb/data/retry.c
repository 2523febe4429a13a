/*
 * retry.c - which server a connecting session tries next (see data.h):
 * the retry order of lb_session_connect without its sockets, so that it
 * can be tested on a pool alone.
 */
#include "data.h"
#include "state_types.h"

int
lb_retry_pick(struct lb_pool *p, struct bal_cursor *c, uint64_t client_hash,
              const uint32_t *tried, uint32_t ntried, uint32_t nagain, bool is_paused,
              bool *is_again, uint32_t *pause_ms)
{
    int idx = bal_pick_attempt(p->bal, c, client_hash, tried, ntried, is_again);

    if (idx >= 0 && *is_again && !is_paused) {
        /* A server this client already tried: wait a little first, without
         * holding its slot (a queued client may take it), so that the
         * retries of a burst spread out. */
        lb_queue_release_slot(p, (size_t)idx);
        *pause_ms = bal_retry_pause_ms(c, nagain + 1);
        return LB_PICK_PAUSED;
    }
    return idx;
}
