/*
 * queue.c - a pool's queue of clients waiting for a connection slot (see
 * data.h). The queue is shared by every worker, so the oldest waiter gets
 * the next slot whichever worker freed it; a waiter itself stays on its own
 * worker, which is told of its grant through its mailbox.
 *
 * Lock order: the queue's lock, then a worker's mailbox lock (posting a
 * grant). The daemon's state lock may be held around a kick.
 */
#include <stdatomic.h>

#include "data.h"
#include "state_types.h"

static void
lb_queue_unlink(struct lb_queue *q, struct lb_waiter *wt)
{
    if (wt->prev != NULL)
        wt->prev->next = wt->next;
    else
        q->head = wt->next;
    if (wt->next != NULL)
        wt->next->prev = wt->prev;
    else
        q->tail = wt->prev;
    wt->prev = wt->next = NULL;
    wt->is_queued = false;
    atomic_fetch_sub(&q->depth, 1);
}

/* Puts a waiter at the tail (joining) or back at the head (a grant that
 * could not be posted). */
static void
lb_queue_link(struct lb_queue *q, struct lb_waiter *wt, bool at_head)
{
    wt->prev = at_head ? NULL : q->tail;
    wt->next = at_head ? q->head : NULL;
    if (wt->prev != NULL)
        wt->prev->next = wt;
    else
        q->head = wt;
    if (wt->next != NULL)
        wt->next->prev = wt;
    else
        q->tail = wt;
    wt->is_queued = true;
    /* seq_cst, with the fences of lb_queue_release_slot and the kick: a
     * slot released between a waiter's pick and its joining is seen by the
     * joiner's kick, or the releaser sees this depth and kicks itself. */
    atomic_fetch_add(&q->depth, 1);
}

bool
lb_queue_join(struct lb_waiter *wt)
{
    struct lb_queue *q = &wt->pool->shared->queue;
    uint32_t max = wt->pool->conf->queue_max;

    pthread_mutex_lock(&q->lock);
    if (max != 0 && atomic_load(&q->depth) >= max) {
        q->full_total++;
        pthread_mutex_unlock(&q->lock);
        return false;
    }
    wt->granted = -1;
    lb_queue_link(q, wt, false);
    q->queued_total++;
    pthread_mutex_unlock(&q->lock);
    lb_queue_kick(q);
    return true;
}

bool
lb_queue_leave(struct lb_waiter *wt, bool is_timeout)
{
    struct lb_queue *q = &wt->pool->shared->queue;
    bool was_waiting;

    pthread_mutex_lock(&q->lock);
    was_waiting = wt->is_queued;
    if (was_waiting) {
        lb_queue_unlink(q, wt);
        if (is_timeout)
            q->timeouts_total++;
    }
    pthread_mutex_unlock(&q->lock);
    return was_waiting;
}

void
lb_queue_release_slot(struct lb_pool *p, size_t i)
{
    struct lb_queue *q = &p->shared->queue;

    bal_server_conn_end(p->bal, i);
    /* An uncapped server in rotation makes waiting needless, and the kick
     * that put it there served the queue: its slots never matter here, and
     * connections without caps pay no fence. */
    if (atomic_load_explicit(&p->bal->servers[i].max_active, memory_order_relaxed) == 0)
        return;
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&q->depth) != 0)
        lb_queue_kick(q);
}

/* A slot for the waiter on any server of its own pool, scanning from where
 * the last grant ended so that slots spread over the servers. */
static int
lb_queue_take_slot(struct lb_queue *q, struct lb_waiter *wt)
{
    struct bal_pool *bp = wt->pool->bal;
    size_t n = bp->nservers;

    for (size_t k = 0; k < n; k++) {
        size_t i = (q->kick_from + k) % n;

        if (bal_server_take_slot(bp, i)) {
            q->kick_from = i + 1;
            return (int)i;
        }
    }
    return -1;
}

void
lb_queue_kick(struct lb_queue *q)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&q->depth) == 0)
        return;
    pthread_mutex_lock(&q->lock);
    while (q->head != NULL) {
        struct lb_waiter *wt = q->head;
        int i = lb_queue_take_slot(q, wt);

        if (i < 0)
            break;
        lb_queue_unlink(q, wt);
        wt->granted = i;
        if (lb_worker_post_grant(wt->w, wt) != 0) {
            /* Out of memory: the waiter keeps its place and waits for the
             * next slot or its timeout. */
            wt->granted = -1;
            lb_queue_link(q, wt, true);
            bal_server_conn_end(wt->pool->bal, (size_t)i);
            break;
        }
        lb_hist_observe(&q->wait, (double)(lb_mono_ms() - wt->since_ms));
    }
    pthread_mutex_unlock(&q->lock);
}
