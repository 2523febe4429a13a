/* Tests lb/data/retry.c, the retry order of a connecting session, on the
 * pool of a built generation: the servers in rotation it has not tried
 * come first, each once, its slot taken; then the one tried longest ago
 * again, but only after a pause (no slot held meanwhile, so a queued
 * client can take it) whose length doubles with each repeat (25 ms class,
 * then 50, 100, ...: bal_retry_pause_ms(c, nagain + 1)); a server out of
 * rotation is never picked, also by a session of the generation a reload
 * replaced, and full or empty pools say so. What session.c keeps around
 * this call (the attempt budget, retries + 1; the timer of the pause; the
 * sockets) is not here. */
#include <event2/event.h>

#include "check.h"
#include "data.h"
#include "lb/lb_fixture.h"

/* A session's attempts as session.c keeps them: tried[], nagain, and the
 * pause it is waiting out. Every connect fails at once, which gives the
 * slot back (lb_session_connect_failed). */
struct attempts {
    uint32_t tried[64];
    uint32_t ntried;
    uint32_t nagain;
    bool is_paused;
};

/* The next pick; *pause_ms is set when it paused. */
static int
next(struct lb_pool *p, struct bal_cursor *c, struct attempts *a, bool *is_again,
     uint32_t *pause_ms)
{
    int idx;

    *pause_ms = 0;
    idx = lb_retry_pick(p, c, 7, a->tried, a->ntried, a->nagain, a->is_paused, is_again,
                        pause_ms);
    if (idx == LB_PICK_PAUSED) {
        a->is_paused = true;
    } else if (idx >= 0) {
        a->is_paused = false;
        a->tried[a->ntried++] = (uint32_t)idx;
        a->nagain += *is_again;
    }
    return idx;
}

static uint32_t
active_total(const struct lb_pool *p)
{
    uint32_t n = 0;

    for (size_t i = 0; i < p->bal->nservers; i++)
        n += bal_server_active(p->bal, i);
    return n;
}

static const char three[] =
    "[global]\nworkers = 1\n"
    "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
    "[pool web]\ncheck = none\nretries = 8\n"
    "server = a 127.0.0.1:9001\n"
    "server = b 127.0.0.1:9002\n"
    "server = c 127.0.0.1:9003\n";

/* Three servers: each once, then the oldest tried again after a pause,
 * then the next oldest, each repeat paused once. */
static void
test_order(void)
{
    struct fx f;
    struct lb_pool *p;
    struct bal_cursor *c;
    struct attempts a = { 0 };
    uint32_t pause;
    bool again;
    int idx;

    fx_start(&f, three);
    p = &f.d.gen->pools[0];
    c = bal_cursor_new(p->bal, 0);
    for (int k = 0; k < 3; k++) {
        idx = next(p, c, &a, &again, &pause);
        CHECK(idx >= 0 && idx < 3);
        CHECK(!again);
        CHECK_EQ_INT(pause, 0);
        CHECK_EQ_INT(active_total(p), 1);       /* this one's slot, held */
        for (uint32_t j = 0; j + 1 < a.ntried; j++)
            CHECK(a.tried[j] != (uint32_t)idx); /* not one tried before */
        if (idx >= 0)
            lb_queue_release_slot(p, (size_t)idx);  /* the connect failed */
    }
    CHECK_EQ_INT(a.ntried, 3);

    /* every one tried: the oldest again, after a pause without its slot */
    for (uint32_t k = 0; k < 3; k++) {
        idx = next(p, c, &a, &again, &pause);
        CHECK_EQ_INT(idx, LB_PICK_PAUSED);
        CHECK(pause > 0);
        CHECK_EQ_INT(active_total(p), 0);
        idx = next(p, c, &a, &again, &pause);
        CHECK(again);
        CHECK_EQ_INT(idx, a.tried[k]);          /* tried longest ago */
        CHECK_EQ_INT(active_total(p), 1);
        CHECK_EQ_INT(a.nagain, k + 1);
        if (idx >= 0)
            lb_queue_release_slot(p, (size_t)idx);
    }
    bal_cursor_free(c);
    fx_stop(&f);
}

/* The k-th repeat waits 50-150% of 25 ms << (k - 1), at most 1 s: over
 * 40 sessions, every pause in its class and the classes really apart (a
 * pause one class short would stay below 75% of this one's base). */
static void
test_pauses_double(void)
{
    static const uint32_t base[] = { 25, 50, 100, 200, 400, 800, 1000, 1000 };
    enum { REPEATS = 8, SESSIONS = 40 };
    uint32_t lo[REPEATS], hi[REPEATS];
    struct fx f;
    struct lb_pool *p;

    fx_start(&f, "[global]\nworkers = 1\n"
                 "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
                 "[pool web]\ncheck = none\nretries = 9\n"
                 "server = a 127.0.0.1:9001\n");
    p = &f.d.gen->pools[0];
    for (int k = 0; k < REPEATS; k++) {
        lo[k] = UINT32_MAX;
        hi[k] = 0;
    }
    for (int s = 0; s < SESSIONS; s++) {
        struct bal_cursor *c = bal_cursor_new(p->bal, (uint64_t)s);
        struct attempts a = { 0 };
        uint32_t pause;
        bool again;
        int idx = next(p, c, &a, &again, &pause);

        CHECK_EQ_INT(idx, 0);                   /* the first: no pause */
        lb_queue_release_slot(p, 0);
        for (int k = 0; k < REPEATS; k++) {
            CHECK_EQ_INT(next(p, c, &a, &again, &pause), LB_PICK_PAUSED);
            lo[k] = pause < lo[k] ? pause : lo[k];
            hi[k] = pause > hi[k] ? pause : hi[k];
            idx = next(p, c, &a, &again, &pause);
            CHECK_EQ_INT(idx, 0);
            CHECK(again);
            CHECK_EQ_INT(pause, 0);             /* one pause per repeat */
            if (idx == 0)
                lb_queue_release_slot(p, 0);
        }
        bal_cursor_free(c);
    }
    for (int k = 0; k < REPEATS; k++) {
        if (lo[k] < base[k] / 2 || hi[k] >= base[k] * 3 / 2 || hi[k] < base[k] * 3 / 4)
            fprintf(stderr, "repeat %d: pauses %u..%u ms, base %u\n", k + 1, lo[k], hi[k],
                    base[k]);
        CHECK(lo[k] >= base[k] / 2);
        CHECK(hi[k] < base[k] * 3 / 2);
        CHECK(hi[k] >= base[k] * 3 / 4);
    }
    fx_stop(&f);
}

static void
on_msgs(void *msgs, size_t n, void *arg)
{
    const struct lb_worker_msg *m = msgs;

    for (size_t i = 0; i < n; i++)
        if (m[i].kind == LB_WORKER_GRANT)
            *(struct lb_waiter **)arg = m[i].waiter;
}

/* One server of one slot. A session's retry must repeat it: the pick
 * takes the slot and, pausing, gives it back through the queue, whose
 * oldest waiter gets it (here one that joined while the server was out of
 * rotation, before the kick that would have served it); after its pause
 * the session finds the server full (and queues, in session.c). */
static void
test_pause_frees_slot(void)
{
    struct fx f;
    struct lb_pool *p;
    struct bal_cursor *c;
    struct attempts a = { 0 };
    struct lb_worker w = { 0 };
    struct lb_waiter wt, *granted = NULL;
    uint32_t pause;
    bool again;

    fx_start(&f, "[global]\nworkers = 1\n"
                 "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
                 "[pool web]\ncheck = none\nretries = 3\n"
                 "server = a 127.0.0.1:9001 max_connections=1\n");
    p = &f.d.gen->pools[0];
    c = bal_cursor_new(p->bal, 0);
    w.mailbox = lb_mailbox_new(f.d.base, sizeof(struct lb_worker_msg), on_msgs, &granted);
    CHECK_EQ_INT(next(p, c, &a, &again, &pause), 0);
    lb_queue_release_slot(p, 0);        /* its connect failed */

    bal_server_set_in_rotation(p->bal, 0, false);
    wt = (struct lb_waiter){ .w = &w, .pool = p, .since_ms = lb_mono_ms(), .granted = -1 };
    CHECK(lb_queue_join(&wt));
    CHECK(wt.is_queued);
    bal_server_set_in_rotation(p->bal, 0, true);

    CHECK_EQ_INT(next(p, c, &a, &again, &pause), LB_PICK_PAUSED);
    event_base_loop(f.d.base, EVLOOP_NONBLOCK);
    CHECK(granted == &wt);
    CHECK_EQ_INT(wt.granted, 0);
    CHECK_EQ_INT(bal_server_active(p->bal, 0), 1);     /* the waiter's */
    CHECK_EQ_INT(next(p, c, &a, &again, &pause), BAL_PICK_FULL);
    CHECK_EQ_INT(bal_server_active(p->bal, 0), 1);
    lb_queue_release_slot(p, 0);

    /* nobody waiting: after its pause the session has the server */
    CHECK_EQ_INT(next(p, c, &a, &again, &pause), 0);
    CHECK(again);
    lb_queue_release_slot(p, 0);
    lb_mailbox_free(w.mailbox, NULL, NULL);
    bal_cursor_free(c);
    fx_stop(&f);
}

/* A reload disables b; a session that began before it retries in its old
 * pool, with a fresh cursor as session.c makes one: it never picks b, and
 * goes back to a rather than to b. */
static void
test_old_generation(void)
{
    struct fx f;
    struct lb_gen *g1, *g2;
    struct lb_pool *old;
    size_t held;

    fx_start(&f, three);
    g1 = f.d.gen;
    old = &g1->pools[0];
    g2 = fx_gen(&f, three, g1);
    CHECK_EQ_INT(lb_gen_decide_reserve(&f.d, g2, g1), 0);
    pthread_mutex_lock(&f.d.state_lock);
    lb_gen_decide(&f.d, g2, g1, false, &held);
    f.d.gen = g2;
    lb_server_set_admin(&f.d, lb_gen_find_server(g2, "web", "b"), BAL_ADMIN_DISABLE);
    pthread_mutex_unlock(&f.d.state_lock);

    for (int s = 0; s < 30; s++) {
        struct bal_cursor *c = bal_cursor_new(old->bal, (uint64_t)s);
        struct attempts a = { 0 };
        uint32_t pause;
        bool again;

        for (int k = 0; k < 6; k++) {
            int idx = next(old, c, &a, &again, &pause);

            CHECK(idx != 1);                    /* b: disabled since */
            CHECK(idx == 0 || idx == 2 || idx == LB_PICK_PAUSED);
            if (idx >= 0)
                lb_queue_release_slot(old, (size_t)idx);
        }
        bal_cursor_free(c);
    }
    CHECK_EQ_INT(active_total(&g2->pools[0]), 0);
    lb_gen_unref(g1);
    fx_stop(&f);
}

/* Nothing in rotation: none, nothing held; every server at its cap: full. */
static void
test_none_and_full(void)
{
    struct fx f;
    struct lb_pool *p;
    struct bal_cursor *c;
    struct attempts a = { 0 };
    uint32_t pause;
    bool again;

    fx_start(&f, "[global]\nworkers = 1\n"
                 "[frontend web]\nlisten = 127.0.0.1:@\npool = web\n"
                 "[pool web]\ncheck = none\n"
                 "server = a 127.0.0.1:9001 max_connections=1\n"
                 "server = b 127.0.0.1:9002 max_connections=1\n");
    p = &f.d.gen->pools[0];
    c = bal_cursor_new(p->bal, 0);
    CHECK(bal_server_take_slot(p->bal, 0));
    CHECK(bal_server_take_slot(p->bal, 1));
    CHECK_EQ_INT(next(p, c, &a, &again, &pause), BAL_PICK_FULL);
    CHECK_EQ_INT(a.ntried, 0);
    lb_queue_release_slot(p, 0);
    lb_queue_release_slot(p, 1);
    bal_server_set_in_rotation(p->bal, 0, false);
    bal_server_set_in_rotation(p->bal, 1, false);
    CHECK_EQ_INT(next(p, c, &a, &again, &pause), BAL_PICK_NONE);
    CHECK_EQ_INT(active_total(p), 0);
    bal_cursor_free(c);
    fx_stop(&f);
}

int
main(void)
{
    test_order();
    test_pauses_double();
    test_pause_frees_slot();
    test_old_generation();
    test_none_and_full();
    return CHECK_DONE();
}
