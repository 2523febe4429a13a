/* Tests lb/data/queue.c on the pool of a built generation: waiters get
 * slots first come, first served, whichever worker they are on and
 * whichever server freed one; a grant takes the slot and is posted to the
 * waiter's own worker; queue_max refuses the next client and counts it; a
 * waiter that leaves (queue_timeout) is counted and never granted, and one
 * whose grant is on the way is told so; a kick hands every free slot of
 * the servers in rotation to the oldest waiters, spread over the servers;
 * and under threads racing to join and release, every waiter is granted
 * exactly once and no slot is lost. */
#include <pthread.h>
#include <stdatomic.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "check.h"
#include "data.h"
#include "lb/lb_fixture.h"

#define MAX_GRANTS 4096

/* A worker as the queue sees it: a mailbox on the test's loop that
 * records the grants posted to it, in order. */
struct grants {
    struct lb_waiter *w[MAX_GRANTS];
    size_t n;
    size_t other;                       /* messages that were not grants */
    struct lb_pool *release_to;         /* threads test: give the slot back */
    size_t want;
    struct event_base *base;
};

struct test_worker {
    struct lb_worker w;
    struct grants g;
};

static void
on_msgs(void *msgs, size_t n, void *arg)
{
    struct grants *g = arg;
    const struct lb_worker_msg *m = msgs;

    for (size_t i = 0; i < n; i++) {
        if (m[i].kind != LB_WORKER_GRANT) {
            g->other++;
            continue;
        }
        if (g->n < MAX_GRANTS)
            g->w[g->n] = m[i].waiter;
        g->n++;
        if (g->release_to != NULL) {
            /* the session connected and closed at once */
            lb_queue_release_slot(g->release_to, (size_t)m[i].waiter->granted);
            if (g->n == g->want)
                event_base_loopbreak(g->base);
        }
    }
}

static void
worker_init(struct test_worker *tw, struct event_base *base, unsigned id)
{
    memset(tw, 0, sizeof(*tw));
    tw->w.id = id;
    tw->g.base = base;
    tw->w.mailbox = lb_mailbox_new(base, sizeof(struct lb_worker_msg), on_msgs, &tw->g);
    if (tw->w.mailbox == NULL)
        fx_die("mailbox", "out of memory");
}

static void
worker_fini(struct test_worker *tw)
{
    lb_mailbox_free(tw->w.mailbox, NULL, NULL);
}

/* Delivers what was posted to the workers. */
static void
deliver(struct fx *f)
{
    event_base_loop(f->d.base, EVLOOP_NONBLOCK);
}

static void
waiter_init(struct lb_waiter *wt, struct test_worker *tw, struct lb_pool *p)
{
    *wt = (struct lb_waiter){ .w = &tw->w, .pool = p, .since_ms = lb_mono_ms(), .granted = -1 };
}

static const char two_capped[] =
    "[global]\nworkers = 1\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = none\nqueue_max = 3\nqueue_timeout = 5s\n"
    "server = a 127.0.0.1:1 max_connections=1\n"
    "server = b 127.0.0.1:2 max_connections=1\n";

/* Every slot taken, three clients wait from two workers: each released
 * slot goes to the oldest waiter, on whatever server it was freed, and the
 * grant reaches the waiter's own worker. */
static void
test_first_come_first_served(void)
{
    struct fx f;
    struct test_worker w0, w1;
    struct lb_waiter a, b, c;
    struct lb_pool *p;
    struct lb_queue *q;

    fx_start(&f, two_capped);
    p = &f.d.gen->pools[0];
    q = &p->shared->queue;
    worker_init(&w0, f.d.base, 0);
    worker_init(&w1, f.d.base, 1);
    CHECK(bal_server_take_slot(p->bal, 0));
    CHECK(bal_server_take_slot(p->bal, 1));

    waiter_init(&a, &w1, p);
    waiter_init(&b, &w0, p);
    waiter_init(&c, &w1, p);
    CHECK(lb_queue_join(&a));
    CHECK(lb_queue_join(&b));
    CHECK(lb_queue_join(&c));
    deliver(&f);
    CHECK_EQ_INT(w0.g.n + w1.g.n, 0);   /* no slot: nobody granted */
    CHECK_EQ_INT(atomic_load(&q->depth), 3);
    CHECK_EQ_INT(q->queued_total, 3);
    CHECK(a.is_queued && b.is_queued && c.is_queued);

    /* server b frees first: the oldest (a, on worker 1) gets b's slot */
    lb_queue_release_slot(p, 1);
    deliver(&f);
    CHECK_EQ_INT(w1.g.n, 1);
    CHECK_EQ_INT(w0.g.n, 0);
    CHECK(w1.g.w[0] == &a);
    CHECK_EQ_INT(a.granted, 1);
    CHECK(!a.is_queued);
    CHECK_EQ_INT(bal_server_active(p->bal, 1), 1);   /* taken for a */
    CHECK_EQ_INT(atomic_load(&q->depth), 2);

    /* then a: b, on worker 0 */
    lb_queue_release_slot(p, 0);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 1);
    CHECK(w0.g.w[0] == &b);
    CHECK_EQ_INT(b.granted, 0);
    CHECK_EQ_INT(w1.g.n, 1);            /* c still waits */
    CHECK(c.is_queued);
    CHECK_EQ_INT(c.granted, -1);
    CHECK_EQ_INT(q->wait.count, 2);     /* the served ones */

    CHECK(lb_queue_leave(&c, false));
    CHECK_EQ_INT(q->timeouts_total, 0); /* a shutdown is no timeout */
    CHECK_EQ_INT(atomic_load(&q->depth), 0);
    CHECK(q->head == NULL && q->tail == NULL);
    CHECK_EQ_INT(w0.g.other + w1.g.other, 0);
    worker_fini(&w0);
    worker_fini(&w1);
    fx_stop(&f);
}

/* queue_max = 3: the fourth client is refused and counted; a place that
 * frees (a timeout) can be taken again. */
static void
test_queue_max(void)
{
    struct fx f;
    struct test_worker w0;
    struct lb_waiter wt[5];
    struct lb_pool *p;
    struct lb_queue *q;

    fx_start(&f, two_capped);
    p = &f.d.gen->pools[0];
    q = &p->shared->queue;
    worker_init(&w0, f.d.base, 0);
    CHECK(bal_server_take_slot(p->bal, 0));
    CHECK(bal_server_take_slot(p->bal, 1));
    for (int i = 0; i < 5; i++)
        waiter_init(&wt[i], &w0, p);
    CHECK(lb_queue_join(&wt[0]));
    CHECK(lb_queue_join(&wt[1]));
    CHECK(lb_queue_join(&wt[2]));
    CHECK(!lb_queue_join(&wt[3]));
    CHECK(!wt[3].is_queued);
    CHECK_EQ_INT(q->full_total, 1);
    CHECK_EQ_INT(q->queued_total, 3);   /* the refused one never waited */
    CHECK_EQ_INT(atomic_load(&q->depth), 3);

    /* the middle one times out: counted, unlinked, the order kept */
    CHECK(lb_queue_leave(&wt[1], true));
    CHECK_EQ_INT(q->timeouts_total, 1);
    CHECK(!lb_queue_leave(&wt[1], true));    /* not waiting any more */
    CHECK_EQ_INT(q->timeouts_total, 1);
    CHECK(lb_queue_join(&wt[4]));
    CHECK_EQ_INT(q->full_total, 1);

    lb_queue_release_slot(p, 0);
    lb_queue_release_slot(p, 1);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 2);
    CHECK(w0.g.w[0] == &wt[0]);
    CHECK(w0.g.n >= 2 && w0.g.w[1] == &wt[2]);   /* the one that left is skipped */
    CHECK(wt[4].is_queued);
    CHECK_EQ_INT(wt[1].granted, -1);
    CHECK_EQ_INT(q->wait.count, 2);     /* the timeout is not a served wait */

    /* a waiter whose grant is on the way cannot leave: it must take the
     * grant and give the slot back */
    CHECK(!lb_queue_leave(&wt[0], true));
    CHECK_EQ_INT(q->timeouts_total, 1);
    CHECK(lb_queue_leave(&wt[4], true));
    CHECK_EQ_INT(q->timeouts_total, 2);
    worker_fini(&w0);
    fx_stop(&f);
}

/* A slot freed between the client's pick and its joining: the join itself
 * grants it, at once. */
static void
test_join_with_free_slot(void)
{
    struct fx f;
    struct test_worker w0;
    struct lb_waiter wt;
    struct lb_pool *p;

    fx_start(&f, two_capped);
    p = &f.d.gen->pools[0];
    worker_init(&w0, f.d.base, 0);
    CHECK(bal_server_take_slot(p->bal, 0));
    waiter_init(&wt, &w0, p);
    CHECK(lb_queue_join(&wt));
    CHECK(!wt.is_queued);
    CHECK_EQ_INT(wt.granted, 1);
    CHECK_EQ_INT(bal_server_active(p->bal, 1), 1);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 1);
    CHECK_EQ_INT(atomic_load(&p->shared->queue.depth), 0);
    worker_fini(&w0);
    fx_stop(&f);
}

static const char four_slots[] =
    "[global]\nworkers = 1\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = none\nqueue_max = 0\n"
    "server = a 127.0.0.1:1 max_connections=2\n"
    "server = b 127.0.0.1:2 max_connections=2\n"
    "server = c 127.0.0.1:3 max_connections=2\n";

/* Servers come back into rotation (a kick): every free slot goes to the
 * oldest waiters, in their order, spread over the servers; a server out
 * of rotation gives none; the rest keep waiting (queue_max = 0: no
 * limit). */
static void
test_kick(void)
{
    struct fx f;
    struct test_worker w0;
    struct lb_waiter wt[7];
    struct lb_pool *p;
    struct lb_queue *q;
    size_t per_server[3] = { 0 };

    fx_start(&f, four_slots);
    p = &f.d.gen->pools[0];
    q = &p->shared->queue;
    worker_init(&w0, f.d.base, 0);
    for (size_t i = 0; i < 3; i++)
        bal_server_set_in_rotation(p->bal, i, false);
    for (int i = 0; i < 7; i++) {
        waiter_init(&wt[i], &w0, p);
        CHECK(lb_queue_join(&wt[i]));
    }
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 0);            /* nothing in rotation: all wait */
    CHECK_EQ_INT(atomic_load(&q->depth), 7);

    bal_server_set_in_rotation(p->bal, 0, true);
    bal_server_set_in_rotation(p->bal, 2, true);
    lb_queue_kick(q);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 4);            /* a's 2 and c's 2 slots */
    for (size_t i = 0; i < w0.g.n && i < 4; i++) {
        CHECK(w0.g.w[i] == &wt[i]);     /* oldest first */
        CHECK(wt[i].granted == 0 || wt[i].granted == 2);
        if (wt[i].granted >= 0)
            per_server[wt[i].granted]++;
    }
    /* spread: the first two grants went to different servers */
    CHECK(wt[0].granted != wt[1].granted);
    CHECK_EQ_INT(per_server[0], 2);
    CHECK_EQ_INT(per_server[1], 0);
    CHECK_EQ_INT(per_server[2], 2);
    CHECK_EQ_INT(bal_server_active(p->bal, 0), 2);
    CHECK_EQ_INT(bal_server_active(p->bal, 1), 0);
    CHECK_EQ_INT(bal_server_active(p->bal, 2), 2);
    CHECK_EQ_INT(atomic_load(&q->depth), 3);
    for (int i = 4; i < 7; i++)
        CHECK(wt[i].is_queued);

    /* a slot of a server out of rotation (draining) goes to nobody */
    bal_server_set_in_rotation(p->bal, 0, false);
    lb_queue_release_slot(p, 0);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 4);
    CHECK_EQ_INT(bal_server_active(p->bal, 0), 1);
    CHECK_EQ_INT(atomic_load(&q->depth), 3);
    /* ... and one of a server in rotation to the oldest still waiting */
    lb_queue_release_slot(p, 2);
    deliver(&f);
    CHECK_EQ_INT(w0.g.n, 5);
    CHECK(w0.g.n == 5 && w0.g.w[4] == &wt[4]);
    CHECK_EQ_INT(wt[4].granted, 2);
    for (int i = 5; i < 7; i++)
        CHECK(lb_queue_leave(&wt[i], false));
    CHECK_EQ_INT(atomic_load(&q->depth), 0);
    worker_fini(&w0);
    fx_stop(&f);
}

/* ----------------------------------------------------- threads at once */

#define JOINERS 4
#define PER_JOINER 250

struct joiner {
    struct lb_pool *p;
    struct test_worker *tw;
    struct lb_waiter wt[PER_JOINER];
    unsigned refused;
};

static void *
join_all(void *arg)
{
    struct joiner *j = arg;

    for (int i = 0; i < PER_JOINER; i++) {
        waiter_init(&j->wt[i], j->tw, j->p);
        if (!lb_queue_join(&j->wt[i]))
            j->refused++;
    }
    return NULL;
}

/* Four threads join while the worker's loop gives every granted slot back
 * at once: a slot freed while a waiter joins is never lost (the waiter
 * would then wait forever), no waiter is granted twice, and at the end
 * every slot is free and the queue empty. A lost grant fails by the
 * deadline, not by hanging. */
static void
test_threads(void)
{
    struct fx f;
    struct test_worker w0;
    struct joiner j[JOINERS];
    pthread_t t[JOINERS];
    struct lb_pool *p;
    struct lb_queue *q;
    struct timeval limit = { 20, 0 };
    size_t twice = 0;

    fx_start(&f, "[global]\nworkers = 1\n"
                 "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
                 "[pool web]\ncheck = none\nqueue_max = 0\n"
                 "server = a 127.0.0.1:1 max_connections=1\n"
                 "server = b 127.0.0.1:2 max_connections=1\n");
    p = &f.d.gen->pools[0];
    q = &p->shared->queue;
    worker_init(&w0, f.d.base, 0);
    w0.g.release_to = p;
    w0.g.want = JOINERS * PER_JOINER;
    for (int i = 0; i < JOINERS; i++) {
        j[i] = (struct joiner){ .p = p, .tw = &w0 };
        pthread_create(&t[i], NULL, join_all, &j[i]);
    }
    event_base_loopexit(f.d.base, &limit);
    event_base_loop(f.d.base, EVLOOP_NO_EXIT_ON_EMPTY);
    for (int i = 0; i < JOINERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(j[i].refused, 0);
    }
    CHECK_EQ_INT(w0.g.n, JOINERS * PER_JOINER);
    for (size_t i = 0; i < w0.g.n && i < MAX_GRANTS; i++) {
        /* each waiter once: its granted index is consumed by marking it */
        if (w0.g.w[i]->granted == -2)
            twice++;
        w0.g.w[i]->granted = -2;
    }
    CHECK_EQ_INT(twice, 0);
    CHECK_EQ_INT(atomic_load(&q->depth), 0);
    CHECK_EQ_INT(q->queued_total, JOINERS * PER_JOINER);
    CHECK_EQ_INT(bal_server_active(p->bal, 0), 0);
    CHECK_EQ_INT(bal_server_active(p->bal, 1), 0);
    worker_fini(&w0);
    fx_stop(&f);
}

int
main(void)
{
    evthread_use_pthreads();
    test_first_come_first_served();
    test_queue_max();
    test_join_with_free_slot();
    test_kick();
    test_threads();
    return CHECK_DONE();
}
