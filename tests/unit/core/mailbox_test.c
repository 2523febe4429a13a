/* Tests lb/core/mailbox.c: every message arrives once, in each poster's
 * order, with one wake-up per batch, from many threads at once. */
#include <pthread.h>
#include <stdlib.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "check.h"
#include "core.h"

#define POSTERS 4
#define PER_POSTER 20000

struct msg {
    unsigned poster;
    unsigned seq;
};

struct sink {
    struct event_base *base;
    unsigned next[POSTERS];         /* the seq expected next, per poster */
    unsigned received;
    unsigned batches;
    unsigned out_of_order;
};

static void
on_msgs(void *msgs, size_t n, void *arg)
{
    struct sink *s = arg;
    const struct msg *m = msgs;

    s->batches++;
    for (size_t i = 0; i < n; i++) {
        if (m[i].poster >= POSTERS || m[i].seq != s->next[m[i].poster])
            s->out_of_order++;
        else
            s->next[m[i].poster]++;
        s->received++;
    }
    if (s->received == POSTERS * PER_POSTER)
        event_base_loopbreak(s->base);
}

struct poster {
    struct lb_mailbox *mb;
    unsigned id;
    unsigned failed;
};

static void *
post_all(void *arg)
{
    struct poster *p = arg;

    for (unsigned i = 0; i < PER_POSTER; i++) {
        struct msg m = { .poster = p->id, .seq = i };

        if (lb_mailbox_post(p->mb, &m) == -1)
            p->failed++;
    }
    return NULL;
}

static void
test_many_posters(void)
{
    struct sink s = { 0 };
    struct poster p[POSTERS];
    pthread_t t[POSTERS];
    struct lb_mailbox *mb;
    struct timeval limit = { 20, 0 };     /* a lost wake-up fails, not hangs */

    s.base = event_base_new();
    mb = lb_mailbox_new(s.base, sizeof(struct msg), on_msgs, &s);
    CHECK(mb != NULL);
    for (unsigned i = 0; i < POSTERS; i++) {
        p[i] = (struct poster){ .mb = mb, .id = i };
        pthread_create(&t[i], NULL, post_all, &p[i]);
    }
    event_base_loopexit(s.base, &limit);
    event_base_loop(s.base, EVLOOP_NO_EXIT_ON_EMPTY);
    for (unsigned i = 0; i < POSTERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(p[i].failed, 0);
        CHECK_EQ_INT(s.next[i], PER_POSTER);
    }
    CHECK_EQ_INT(s.received, POSTERS * PER_POSTER);
    CHECK_EQ_INT(s.out_of_order, 0);
    /* batched: far fewer wake-ups than messages */
    CHECK(s.batches >= 1 && s.batches < s.received);
    lb_mailbox_free(mb);
    event_base_free(s.base);
}

static void
count_batch(void *msgs, size_t n, void *arg)
{
    *(size_t *)arg += n;
}

/* Messages posted before the owner's loop runs wait for it; take() hands
 * the undelivered ones to an owner that must release them. */
static void
test_take_and_order_before_loop(void)
{
    struct event_base *base = event_base_new();
    size_t delivered = 0;
    struct lb_mailbox *mb = lb_mailbox_new(base, sizeof(int), count_batch, &delivered);
    int *got = NULL;
    size_t n;

    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(lb_mailbox_post(mb, &i), 0);
    n = lb_mailbox_take(mb, (void **)&got);
    CHECK_EQ_INT(n, 5);
    for (int i = 0; got != NULL && i < 5; i++)
        CHECK_EQ_INT(got[i], i);
    free(got);
    /* the wake-up still pending finds nothing */
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(delivered, 0);
    n = lb_mailbox_take(mb, (void **)&got);
    CHECK_EQ_INT(n, 0);
    CHECK(got == NULL);

    /* after a delivered batch, the next post wakes the owner again */
    for (int i = 0; i < 3; i++)
        lb_mailbox_post(mb, &i);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(delivered, 3);
    lb_mailbox_post(mb, &n);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(delivered, 4);
    lb_mailbox_free(mb);
    event_base_free(base);
}

int
main(void)
{
    evthread_use_pthreads();
    test_many_posters();
    test_take_and_order_before_loop();
    libevent_global_shutdown();
    return CHECK_DONE();
}
