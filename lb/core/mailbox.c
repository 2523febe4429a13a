/*
 * mailbox.c - a queue of messages to the thread that owns an event_base.
 *
 * Posters append a copy under the mailbox's mutex and, when the queue was
 * empty, activate the owner's event (event_active is safe from any thread
 * once evthread_use_pthreads() has run, and activating an active event does
 * nothing). The owner swaps the whole array out under the mutex and handles
 * it outside, so a poster never waits for the owner's work and the owner
 * holds the mutex for two pointer moves per batch.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core.h"

struct lb_mailbox {
    size_t msg_size;
    lb_mailbox_pt on_msgs;
    void *arg;
    struct event *ev;                   /* in the owner's base */

    pthread_mutex_t lock;               /* guards the queue */
    char *msgs;
    size_t n, cap;
};

/* Takes the whole queue: the messages not delivered yet, as a malloc'd
 * array (NULL when none). */
static size_t
lb_mailbox_take(struct lb_mailbox *mb, void **msgs)
{
    size_t n;

    pthread_mutex_lock(&mb->lock);
    *msgs = mb->msgs;
    n = mb->n;
    mb->msgs = NULL;
    mb->n = mb->cap = 0;
    pthread_mutex_unlock(&mb->lock);
    return n;
}

static void
lb_mailbox_on_event(evutil_socket_t fd, short what, void *arg)
{
    struct lb_mailbox *mb = arg;
    void *msgs;
    size_t n = lb_mailbox_take(mb, &msgs);

    if (n > 0)
        mb->on_msgs(msgs, n, mb->arg);
    free(msgs);
}

struct lb_mailbox *
lb_mailbox_new(struct event_base *base, size_t msg_size, lb_mailbox_pt on_msgs,
               void *arg)
{
    struct lb_mailbox *mb = calloc(1, sizeof(*mb));

    if (mb == NULL)
        return NULL;
    mb->msg_size = msg_size;
    mb->on_msgs = on_msgs;
    mb->arg = arg;
    pthread_mutex_init(&mb->lock, NULL);
    mb->ev = event_new(base, -1, 0, lb_mailbox_on_event, mb);
    if (mb->ev == NULL) {
        lb_mailbox_free(mb, NULL, NULL);
        return NULL;
    }
    return mb;
}

int
lb_mailbox_post(struct lb_mailbox *mb, const void *msg)
{
    return lb_mailbox_post_n(mb, msg, 1);
}

int
lb_mailbox_post_n(struct lb_mailbox *mb, const void *msgs, size_t n)
{
    bool was_empty;

    pthread_mutex_lock(&mb->lock);
    if (mb->cap - mb->n < n) {
        size_t cap = mb->cap ? mb->cap : 16;
        char *m;

        while (cap - mb->n < n)
            cap *= 2;
        if ((m = realloc(mb->msgs, cap * mb->msg_size)) == NULL) {
            pthread_mutex_unlock(&mb->lock);
            return -1;
        }
        mb->msgs = m;
        mb->cap = cap;
    }
    memcpy(mb->msgs + mb->n * mb->msg_size, msgs, n * mb->msg_size);
    was_empty = mb->n == 0;
    mb->n += n;
    pthread_mutex_unlock(&mb->lock);
    if (was_empty)
        event_active(mb->ev, EV_READ, 0);
    return 0;
}

void
lb_mailbox_free(struct lb_mailbox *mb, lb_mailbox_pt drop, void *arg)
{
    if (mb == NULL)
        return;
    if (drop != NULL && mb->n > 0)
        drop(mb->msgs, mb->n, arg);
    if (mb->ev != NULL)
        event_free(mb->ev);
    free(mb->msgs);
    pthread_mutex_destroy(&mb->lock);
    free(mb);
}
