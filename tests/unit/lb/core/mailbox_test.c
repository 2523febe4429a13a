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
    lb_mailbox_free(mb, NULL, NULL);
    event_base_free(s.base);
}

static void
count_batch(void *msgs, size_t n, void *arg)
{
    *(size_t *)arg += n;
}

struct dropped {
    size_t n;
    int first, last;
};

static void
record_drop(void *msgs, size_t n, void *arg)
{
    struct dropped *d = arg;
    const int *m = msgs;

    d->n = n;
    d->first = m[0];
    d->last = m[n - 1];
}

/* Messages posted before the owner's loop runs wait for it; a wake-up
 * after a delivered batch comes again; what is never delivered goes to the
 * owner's drop function at the end, in order. */
static void
test_wakeups_and_drop(void)
{
    struct event_base *base = event_base_new();
    size_t delivered = 0;
    struct lb_mailbox *mb = lb_mailbox_new(base, sizeof(int), count_batch, &delivered);
    struct dropped dropped = { 0 };

    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(lb_mailbox_post(mb, &i), 0);
    CHECK_EQ_INT(delivered, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(delivered, 3);
    lb_mailbox_post(mb, &delivered);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(delivered, 4);

    for (int i = 10; i < 15; i++)
        lb_mailbox_post(mb, &i);
    lb_mailbox_free(mb, record_drop, &dropped);
    CHECK_EQ_INT(dropped.n, 5);
    CHECK_EQ_INT(dropped.first, 10);
    CHECK_EQ_INT(dropped.last, 14);
    CHECK_EQ_INT(delivered, 4);
    /* nothing to drop: the drop function is not called */
    dropped.n = 99;
    mb = lb_mailbox_new(base, sizeof(int), count_batch, &delivered);
    lb_mailbox_free(mb, record_drop, &dropped);
    CHECK_EQ_INT(dropped.n, 99);
    event_base_free(base);
}

struct batches {
    size_t calls, n, out_of_order;
};

static void
record_batches(void *msgs, size_t n, void *arg)
{
    struct batches *b = arg;
    const int *m = msgs;

    b->calls++;
    for (size_t i = 0; i < n; i++)
        b->out_of_order += m[i] != (int)(b->n + i);
    b->n += n;
}

/* lb_mailbox_post_n: a run of messages, behind what is queued already, in
 * order, in one batch; runs longer than the queue's room grow it. */
static void
test_post_n(void)
{
    struct event_base *base = event_base_new();
    struct batches b = { 0 };
    struct lb_mailbox *mb = lb_mailbox_new(base, sizeof(int), record_batches, &b);
    int run[1000];

    for (int i = 0; i < 1000; i++)
        run[i] = i + 1;
    CHECK_EQ_INT(lb_mailbox_post(mb, &(int){ 0 }), 0);
    CHECK_EQ_INT(lb_mailbox_post_n(mb, run, 5), 0);
    CHECK_EQ_INT(lb_mailbox_post_n(mb, run + 5, 995), 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK_EQ_INT(b.calls, 1);
    CHECK_EQ_INT(b.n, 1001);
    CHECK_EQ_INT(b.out_of_order, 0);
    lb_mailbox_free(mb, NULL, NULL);
    event_base_free(base);
}

int
main(void)
{
    evthread_use_pthreads();
    test_many_posters();
    test_wakeups_and_drop();
    test_post_n();
    libevent_global_shutdown();
    return CHECK_DONE();
}
