/* outlier_test.c - tests balancer/outlier.c: the window's edges (N - 1 errors, N, errors
 * spread wider than the window, the tenth of a window it may forget early,
 * events out of order, a reload's new window), ejection (1x, 2x, 4x, 8x,
 * 10x, and the level falling one per clean eject time), coming back only
 * at the end of the eject time, the pool's cap, the reason text and the
 * kind names. The expectations are written from bal_outlier.h, not from
 * calling the code. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "bal_outlier.h"

#define EJECT_MS 30000u
static const struct bal_outlier_conf conf = {
    .errors = 5, .window_ms = 10000, .eject_ms = EJECT_MS, .max_eject_percent = 50,
};

#define R BAL_OUTLIER_CONNECT_REFUSED
#define T BAL_OUTLIER_CONNECT_TIMEOUT
#define X BAL_OUTLIER_RESET
#define F BAL_OUTLIER_NO_FIRST_BYTE

/* ---------------------------------------------------------- the window */

struct event {
    enum bal_outlier_kind kind;
    uint64_t at_ms;
};

struct window_case {
    const char *name;
    struct event ev[8];
    size_t n;
    int first_true;             /* index of the first record() that returns
                                   true, -1: none does */
};

/* errors = 5, window 10 s: buckets of 1 s. */
static const struct window_case window_cases[] = {
    { "N-1 in the window: no", { { T, 0 }, { T, 1000 }, { T, 2000 }, { T, 3000 } }, 4, -1 },
    { "N in the window: yes", { { T, 0 }, { T, 1000 }, { T, 2000 }, { T, 3000 }, { T, 4000 } },
      5, 4 },
    { "N in one instant: yes", { { R, 7 }, { R, 7 }, { R, 7 }, { R, 7 }, { R, 7 } }, 5, 4 },
    { "N of mixed kinds: yes", { { R, 0 }, { F, 100 }, { X, 200 }, { T, 300 }, { R, 400 } },
      5, 4 },
    { "N spread over 12 s: no",
      { { T, 0 }, { T, 3000 }, { T, 6000 }, { T, 9000 }, { T, 12000 } }, 5, -1 },
    { "N exactly one window apart: no",
      { { T, 0 }, { T, 2500 }, { T, 5000 }, { T, 7500 }, { T, 10000 } }, 5, -1 },
    { "N within 9.999 s: yes",
      { { T, 0 }, { T, 9000 }, { T, 9100 }, { T, 9200 }, { T, 9999 } }, 5, 4 },
    /* the bound outlier.c states: at most a tenth of the window is lost,
     * on the late side (the first error is 9.9 s old, its bucket gone) */
    { "N within 9.9 s across a bucket edge: no (a tenth early)",
      { { T, 500 }, { T, 9000 }, { T, 9100 }, { T, 9200 }, { T, 10400 } }, 5, -1 },
    { "an older event handled late counts",
      { { T, 5000 }, { T, 5100 }, { T, 5200 }, { T, 5300 }, { T, 4000 } }, 5, 4 },
    { "an event one window older than the newest is dropped",
      { { T, 10000 }, { T, 10100 }, { T, 10200 }, { T, 10300 }, { T, 0 } }, 5, -1 },
    { "an event older than the window is dropped",
      { { T, 20000 }, { T, 20100 }, { T, 20200 }, { T, 20300 }, { T, 5000 } }, 5, -1 },
    { "a gap longer than the window empties it",
      { { T, 0 }, { T, 1 }, { T, 2 }, { T, 3 }, { T, 50000 }, { T, 50001 } }, 6, -1 },
    { "stays true past N (a refused ejection asks again)",
      { { T, 0 }, { T, 1 }, { T, 2 }, { T, 3 }, { T, 4 }, { T, 5 } }, 6, 4 },
};

static void
test_window(void)
{
    for (size_t c = 0; c < sizeof(window_cases) / sizeof(window_cases[0]); c++) {
        const struct window_case *wc = &window_cases[c];
        struct bal_outlier o;
        int first = -1;

        bal_outlier_init(&o);
        for (size_t i = 0; i < wc->n; i++) {
            bool is_eject = bal_outlier_record(&o, &conf, wc->ev[i].kind, wc->ev[i].at_ms);

            if (first < 0 && is_eject)
                first = (int)i;
            /* once true, true on every further error: nothing ejected it */
            if (first >= 0 && !is_eject) {
                fprintf(stderr, "window case \"%s\": event %zu false after true\n",
                        wc->name, i);
                CHECK(false);
            }
        }
        if (first != wc->first_true) {
            fprintf(stderr, "window case \"%s\": first true at %d, want %d\n", wc->name,
                    first, wc->first_true);
            CHECK(false);
        }
    }
}

/* Off, a reload's new window, the errors an ejected server meets, a
 * zeroed struct as a fresh one. */
static void
test_window_state(void)
{
    struct bal_outlier_conf off = conf, wider = conf, brief = conf;
    struct bal_outlier o;

    off.errors = 0;
    wider.window_ms = 20000;
    brief.eject_ms = 1000;
    memset(&o, 0, sizeof(o));
    for (uint64_t t = 0; t < 100; t++)
        CHECK(!bal_outlier_record(&o, &off, T, t));

    /* zeroed: counting */
    memset(&o, 0, sizeof(o));
    for (uint64_t t = 0; t < 4; t++)
        CHECK(!bal_outlier_record(&o, &conf, R, t));
    CHECK(bal_outlier_record(&o, &conf, R, 4));

    /* a reload that changes the window starts it over */
    bal_outlier_init(&o);
    for (uint64_t t = 0; t < 4; t++)
        CHECK(!bal_outlier_record(&o, &conf, R, t));
    CHECK(!bal_outlier_record(&o, &wider, R, 4));
    for (uint64_t t = 5; t < 8; t++)
        CHECK(!bal_outlier_record(&o, &wider, R, t));
    CHECK(bal_outlier_record(&o, &wider, R, 8));

    /* ejected: errors are ignored; back: N new ones are needed, even
     * with the old ones still inside the window (eject 1 s, window 10 s) */
    bal_outlier_init(&o);
    for (uint64_t t = 0; t < 5; t++)
        bal_outlier_record(&o, &brief, R, t);
    CHECK_EQ_INT(bal_outlier_eject(&o, &brief, 5), 1005);
    for (uint64_t t = 10; t < 20; t++)
        CHECK(!bal_outlier_record(&o, &brief, R, t));
    CHECK(!bal_outlier_expire(&o, 1004));
    CHECK(!bal_outlier_record(&o, &brief, R, 1005));    /* not expired yet */
    CHECK(!bal_outlier_is_before_return(&o, 0));    /* never back yet */
    CHECK(bal_outlier_expire(&o, 1005));
    /* back: a connection from before it left is not its new error */
    CHECK(bal_outlier_is_before_return(&o, 4));
    CHECK(bal_outlier_is_before_return(&o, 1004));
    CHECK(!bal_outlier_is_before_return(&o, 1005));
    for (uint64_t t = 0; t < 4; t++)
        CHECK(!bal_outlier_record(&o, &brief, R, 1006 + t));
    CHECK(bal_outlier_record(&o, &brief, R, 1010));
}

/* ------------------------------------------------------------ ejection */

/* Ejected back to back, each time at the instant it came back: 1x, 2x,
 * 4x, 8x, then 10x (the cap) for good. */
static void
test_doubling(void)
{
    static const unsigned factors[] = { 1, 2, 4, 8, 10, 10, 10 };
    struct bal_outlier o;
    uint64_t now = 1000;

    bal_outlier_init(&o);
    for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]); i++) {
        uint64_t until = bal_outlier_eject(&o, &conf, now);

        if (until - now != (uint64_t)factors[i] * EJECT_MS) {
            fprintf(stderr, "ejection %zu: %llu ms, want %u x %u\n", i + 1,
                    (unsigned long long)(until - now), factors[i], EJECT_MS);
            CHECK(false);
        }
        /* a second eject while ejected changes nothing */
        CHECK_EQ_INT(bal_outlier_eject(&o, &conf, now + 1), until);
        CHECK(bal_outlier_is_ejected(&o, until - 1));
        CHECK(!bal_outlier_expire(&o, until - 1));     /* only when over */
        CHECK(!bal_outlier_is_ejected(&o, until));
        CHECK(bal_outlier_expire(&o, until));
        CHECK(!bal_outlier_expire(&o, until + 1));     /* once */
        now = until;
    }
}

/* The level falls one per whole eject time spent back in rotation
 * (Envoy's rule): from the cap, clean for ... the next ejection lasts. */
struct clean_case {
    uint64_t clean_ms;
    unsigned factor;
};

static const struct clean_case clean_cases[] = {
    { 0, 10 },
    { EJECT_MS - 1, 10 },
    { EJECT_MS, 8 },
    { 2 * EJECT_MS, 4 },
    { 3 * EJECT_MS - 1, 4 },
    { 3 * EJECT_MS, 2 },
    { 4 * EJECT_MS, 1 },           /* the reset: a clean period of 4 x eject */
    { 36000000, 1 },
};

/* A server at the cap, back at *back. */
static void
at_cap(struct bal_outlier *o, uint64_t *back)
{
    uint64_t now = 0;

    bal_outlier_init(o);
    for (int i = 0; i < 5; i++) {
        now = bal_outlier_eject(o, &conf, now);
        bal_outlier_expire(o, now);
    }
    *back = now;
}

static void
test_clean_period(void)
{
    struct bal_outlier o;
    uint64_t back, until;

    for (size_t i = 0; i < sizeof(clean_cases) / sizeof(clean_cases[0]); i++) {
        const struct clean_case *cc = &clean_cases[i];

        at_cap(&o, &back);
        until = bal_outlier_eject(&o, &conf, back + cc->clean_ms);
        if (until - (back + cc->clean_ms) != (uint64_t)cc->factor * EJECT_MS) {
            fprintf(stderr, "clean %llu ms: %llu ms, want %u x %u\n",
                    (unsigned long long)cc->clean_ms,
                    (unsigned long long)(until - back - cc->clean_ms), cc->factor, EJECT_MS);
            CHECK(false);
        }
    }

    /* after the reset it doubles again from 1x */
    at_cap(&o, &back);
    until = bal_outlier_eject(&o, &conf, back + 4 * EJECT_MS);
    CHECK_EQ_INT(until - (back + 4 * EJECT_MS), EJECT_MS);
    bal_outlier_expire(&o, until);
    CHECK_EQ_INT(bal_outlier_eject(&o, &conf, until) - until, 2 * EJECT_MS);

    /* the clean time counts from when it was due back, not from a late
     * expire: one eject time late is one clean eject time */
    bal_outlier_init(&o);
    until = bal_outlier_eject(&o, &conf, 0);                    /* 1x, then level 1 */
    CHECK(bal_outlier_expire(&o, until + EJECT_MS));
    CHECK_EQ_INT(bal_outlier_eject(&o, &conf, until + EJECT_MS) - (until + EJECT_MS),
                 EJECT_MS);                                      /* 1x, not 2x */
}

/* A refusal keeps the errors (record stays true) and is new once per
 * ejection. */
static void
test_refused(void)
{
    struct bal_outlier o;
    uint64_t until;

    bal_outlier_init(&o);
    for (uint64_t t = 0; t < 5; t++)
        bal_outlier_record(&o, &conf, T, t);
    CHECK(bal_outlier_refused(&o));
    CHECK(!bal_outlier_refused(&o));
    CHECK(bal_outlier_record(&o, &conf, T, 6));
    CHECK(!bal_outlier_is_ejected(&o, 6));                      /* refused: still in */
    until = bal_outlier_eject(&o, &conf, 7);
    bal_outlier_expire(&o, until);
    CHECK(bal_outlier_refused(&o));
}

/* ----------------------------------------------------------------- cap */

struct cap_case {
    size_t total, ejected;
    uint32_t percent;
    bool may;
};

static const struct cap_case cap_cases[] = {
    { 10, 0, 0, false }, { 1, 0, 0, false },                    /* 0%: never */
    { 0, 0, 50, false },                                        /* no servers */
    { 1, 0, 50, false },                                        /* a lone server */
    { 2, 0, 50, true }, { 2, 1, 50, false },
    { 3, 0, 50, true }, { 3, 1, 50, false },                    /* 1 of 3 */
    { 4, 1, 50, true }, { 4, 2, 50, false },
    { 5, 1, 50, true }, { 5, 2, 50, false },                    /* 2 of 5 */
    { 7, 2, 50, true }, { 7, 3, 50, false },                    /* 3 of 7 */
    { 9, 0, 10, false }, { 10, 0, 10, true }, { 10, 1, 10, false },
    { 1, 0, 100, true }, { 3, 2, 100, true }, { 3, 3, 100, false },  /* 100%: all */
    { 10000, 4999, 50, true }, { 10000, 5000, 50, false },
};

static void
test_may_eject(void)
{
    for (size_t i = 0; i < sizeof(cap_cases) / sizeof(cap_cases[0]); i++) {
        const struct cap_case *cc = &cap_cases[i];

        if (bal_outlier_may_eject(cc->total, cc->ejected, cc->percent) != cc->may) {
            fprintf(stderr, "may_eject(%zu, %zu, %u%%) != %d\n", cc->total, cc->ejected,
                    cc->percent, cc->may);
            CHECK(false);
        }
    }
}

/* -------------------------------------------------------------- reason */

struct reason_case {
    struct event ev[8];
    size_t n;
    uint64_t window_ms;
    const char *text;
    enum bal_outlier_kind kind;
};

static const struct reason_case reason_cases[] = {
    { { { T, 0 }, { T, 1 }, { T, 2 }, { T, 3 }, { T, 4 } }, 5, 10000,
      "outlier: 5 connect timeouts in 10 s", T },
    { { { F, 0 }, { R, 1 }, { R, 2 }, { F, 3 }, { R, 4 } }, 5, 10000,
      "outlier: 3 connect refused, 2 no first byte in 10 s", R },
    { { { X, 0 }, { X, 1 }, { F, 2 }, { F, 3 }, { F, 4 } }, 5, 1500,
      "outlier: 3 no first byte, 2 resets before the first byte in 1500 ms", F },
    /* ties in enum order; one of a kind in the singular */
    { { { X, 0 }, { T, 1 }, { R, 2 }, { X, 3 }, { T, 4 } }, 5, 60000,
      "outlier: 2 connect timeouts, 2 resets before the first byte, 1 connect refused "
      "in 60 s", T },
    /* the counts of the last record() that returned true: 6, not 5 */
    { { { T, 0 }, { T, 1 }, { T, 2 }, { T, 3 }, { T, 4 }, { X, 5 } }, 6, 10000,
      "outlier: 5 connect timeouts, 1 reset before the first byte in 10 s", T },
};

static void
test_reason(void)
{
    for (size_t i = 0; i < sizeof(reason_cases) / sizeof(reason_cases[0]); i++) {
        const struct reason_case *rc = &reason_cases[i];
        struct bal_outlier_conf c = conf;
        struct bal_outlier o;
        char buf[160];

        c.window_ms = rc->window_ms;
        bal_outlier_init(&o);
        for (size_t j = 0; j < rc->n; j++)
            bal_outlier_record(&o, &c, rc->ev[j].kind, rc->ev[j].at_ms);
        /* the ejection empties the window, not the reason */
        bal_outlier_eject(&o, &c, 10);
        CHECK_EQ_INT(bal_outlier_reason(&o, &c, buf, sizeof(buf)), strlen(rc->text));
        CHECK_EQ_STR(buf, rc->text);
        CHECK_EQ_INT(bal_outlier_reason_kind(&o), rc->kind);
    }
}

/* A short buffer is cut and NUL-terminated; the length is the whole. */
static void
test_reason_short(void)
{
    static const char want[] = "outlier: 5 connect timeouts in 10 s";
    struct bal_outlier o;
    char buf[12];

    bal_outlier_init(&o);
    for (uint64_t t = 0; t < 5; t++)
        bal_outlier_record(&o, &conf, T, t);
    memset(buf, 'z', sizeof(buf));
    CHECK_EQ_INT(bal_outlier_reason(&o, &conf, buf, sizeof(buf)), strlen(want));
    CHECK_EQ_STR(buf, "outlier: 5 ");
    CHECK_EQ_INT(bal_outlier_reason(&o, &conf, NULL, 0), strlen(want));
}

static void
test_kind_names(void)
{
    CHECK_EQ_STR(bal_outlier_kind_name(BAL_OUTLIER_CONNECT_REFUSED), "connect_refused");
    CHECK_EQ_STR(bal_outlier_kind_name(BAL_OUTLIER_CONNECT_TIMEOUT), "connect_timeout");
    CHECK_EQ_STR(bal_outlier_kind_name(BAL_OUTLIER_RESET), "reset");
    CHECK_EQ_STR(bal_outlier_kind_name(BAL_OUTLIER_NO_FIRST_BYTE), "no_first_byte");
    CHECK_EQ_STR(bal_outlier_kind_name(BAL_OUTLIER_KINDS), "unknown");
}

int
main(void)
{
    test_window();
    test_window_state();
    test_doubling();
    test_clean_period();
    test_refused();
    test_may_eject();
    test_reason();
    test_reason_short();
    test_kind_names();
    return CHECK_DONE();
}
