/*
 * conf_outlier_test.c - outlier detection's keys (conf/conf_outlier.c):
 * the outlier value with its defaults, any order and exact messages (each
 * naming its part), and whole files through conf_load_text: the keys'
 * defaults (off), both set, first_byte_timeout refused without outlier,
 * a bad value at its own line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf_fixture.h"
#include "conf.h"
#include "conf_value.h"

#define FRONTEND "[frontend web]\nlisten = 127.0.0.1:8080\npool = web\n"
#define POOL "[pool web]\nserver = web1 127.0.0.1:9001\n"      /* lines 4, 5 */

#define USE "use errors:N, window:D, eject:D, max_eject:P%"

struct outlier_case {
    const char *in;
    int rc;
    struct conf_outlier want;       /* rc 0 */
    const char *err;                /* rc -1 */
};

static const struct outlier_case outlier_cases[] = {
    /* off */
    { "", 0, { 0, 0, 0, 0 }, NULL },
    { "  ", 0, { 0, 0, 0, 0 }, NULL },
    /* the example, the defaults, any order, blanks, any case */
    { "errors:5, window:10s, eject:30s, max_eject:50%", 0, { 5, 10000, 30000, 50 }, NULL },
    { "errors:5", 0, { 5, 10000, 30000, 50 }, NULL },
    { "max_eject:100%,eject:1m,errors:1000,window:100ms", 0, { 1000, 100, 60000, 100 }, NULL },
    { " window : 1h ,  errors: 1 ", 0, { 1, 3600000, 30000, 50 }, NULL },
    { "Errors:3, MAX_EJECT:0%", 0, { 3, 10000, 30000, 0 }, NULL },
    { "errors:007, eject:100ms", 0, { 7, 10000, 100, 50 }, NULL },
    /* the parts */
    { "errors:5, foo:1", -1, { 0 }, "unknown part \"foo\" (" USE ")" },
    { "foo", -1, { 0 }, "unknown part \"foo\" (" USE ")" },
    { ":5", -1, { 0 }, "unknown part \":5\" (" USE ")" },
    { "errors:5, errors:6", -1, { 0 }, "errors is given twice" },
    { "window:1s, errors:5, window:2s", -1, { 0 }, "window is given twice" },
    { "errors:5,,eject:1s", -1, { 0 },
      "\"errors:5,,eject:1s\" has an empty part (" USE ", separated by commas)" },
    { "errors:5,", -1, { 0 }, "\"errors:5,\" has an empty part (" USE ", separated by commas)" },
    { "errors", -1, { 0 }, "errors needs a value after a colon (" USE ")" },
    { "errors:5, eject:", -1, { 0 }, "eject needs a value after a colon (" USE ")" },
    { "window:10s, eject:30s", -1, { 0 },
      "errors:N is required (e.g. errors:5, window:10s, eject:30s, max_eject:50%)" },
    /* errors */
    { "errors:x", -1, { 0 }, "errors \"x\" is not a number" },
    { "errors:-1", -1, { 0 }, "errors \"-1\" is not a number" },
    { "errors:5s", -1, { 0 }, "errors \"5s\" is not a number" },
    { "errors:0", -1, { 0 }, "errors 0 is out of range (1..1000)" },
    { "errors:1001", -1, { 0 }, "errors 1001 is out of range (1..1000)" },
    { "errors:99999999999999999999999", -1, { 0 },
      "errors \"99999999999999999999999\" is too large" },
    /* window and eject: conf's durations */
    { "errors:5, window:10q", -1, { 0 }, "window \"10q\" is not a duration (use ms, s, m or h)" },
    { "errors:5, window:10", -1, { 0 }, "window \"10\" needs a unit (ms, s, m or h)" },
    { "errors:5, window:99ms", -1, { 0 }, "window 99ms is out of range (100ms..1h)" },
    { "errors:5, window:0", -1, { 0 }, "window 0 is out of range (100ms..1h)" },
    { "errors:5, eject:61m", -1, { 0 }, "eject 61m is out of range (100ms..1h)" },
    { "errors:5, eject:soon", -1, { 0 }, "eject \"soon\" is not a duration (use ms, s, m or h)" },
    /* max_eject: a percentage only */
    { "errors:5, max_eject:50", -1, { 0 }, "max_eject \"50\" is not a percentage (e.g. 50%)" },
    { "errors:5, max_eject:%", -1, { 0 }, "max_eject \"%\" is not a percentage (e.g. 50%)" },
    { "errors:5, max_eject:-5%", -1, { 0 }, "max_eject \"-5%\" is not a percentage (e.g. 50%)" },
    { "errors:5, max_eject:101%", -1, { 0 }, "max_eject 101% is out of range (0%..100%)" },
};

static void
test_parse(void)
{
    char err[256];

    for (size_t i = 0; i < sizeof(outlier_cases) / sizeof(outlier_cases[0]); i++) {
        const struct outlier_case *oc = &outlier_cases[i];
        struct conf_outlier o = { 99, 99, 99, 99 };
        int rc;

        err[0] = '\0';
        rc = conf_parse_outlier(oc->in, &o, err, sizeof(err));
        CHECK_EQ_INT(rc, oc->rc);
        if (rc != oc->rc)
            fprintf(stderr, "  (case \"%s\": %s)\n", oc->in, err);
        if (rc == 0 && oc->rc == 0) {
            CHECK_EQ_INT(o.errors, oc->want.errors);
            CHECK_EQ_INT(o.window_ms, oc->want.window_ms);
            CHECK_EQ_INT(o.eject_ms, oc->want.eject_ms);
            CHECK_EQ_INT(o.max_eject_percent, oc->want.max_eject_percent);
        } else if (rc != 0 && oc->rc != 0) {
            CHECK_EQ_STR(err, oc->err);
            CHECK_EQ_INT(o.errors, 99);             /* untouched */
        }
    }
}

static void
test_load(void)
{
    char *errors;
    struct conf *c = conf_fixture_load(FRONTEND POOL, &errors), *d;
    const struct conf_pool *p;

    CHECK(c != NULL && errors == NULL);
    if (c == NULL)
        return;
    p = &c->pools[0];
    CHECK_EQ_INT(p->outlier.errors, 0);                 /* off */
    CHECK_EQ_INT(p->first_byte_timeout_ms, 0);
    conf_free(c);

    c = conf_fixture_load(FRONTEND POOL "outlier = errors:5, window:10s, eject:30s, max_eject:50% ; live\n"
             "first_byte_timeout = 2s\n"
             "[pool other]\nserver = o1 127.0.0.1:9002\noutlier = eject:1m, errors:3\n",
             &errors);
    CHECK(c != NULL && errors == NULL);
    if (c == NULL) {
        fprintf(stderr, "%s", errors);
        free(errors);
        return;
    }
    p = &c->pools[0];
    CHECK_EQ_INT(p->outlier.errors, 5);
    CHECK_EQ_INT(p->outlier.window_ms, 10000);
    CHECK_EQ_INT(p->outlier.eject_ms, 30000);
    CHECK_EQ_INT(p->outlier.max_eject_percent, 50);
    CHECK_EQ_INT(p->first_byte_timeout_ms, 2000);
    p = &c->pools[1];
    CHECK_EQ_INT(p->outlier.errors, 3);
    CHECK_EQ_INT(p->outlier.eject_ms, 60000);
    CHECK_EQ_INT(p->first_byte_timeout_ms, 0);
    /* a copy carries the values (conf_dup, a reload's) */
    d = conf_dup(c);
    CHECK(d != NULL && d->pools[0].outlier.errors == 5 &&
          d->pools[0].first_byte_timeout_ms == 2000 && d->pools[1].outlier.eject_ms == 60000);
    conf_free(d);
    conf_free(c);
}

static void
test_load_errors(void)
{
    /* the part named, behind the key, at its line */
    EXPECT_ERRORS(FRONTEND POOL "outlier = errors:5, foo:1\n",
                  "t.ini:6: outlier: unknown part \"foo\" (" USE ")\n");
    EXPECT_ERRORS(FRONTEND POOL "outlier = errors:x\n",
                  "t.ini:6: outlier: errors \"x\" is not a number\n");
    EXPECT_ERRORS(FRONTEND POOL "outlier = errors:5\noutlier = errors:6\n",
                  "t.ini:7: outlier: already set at line 6\n");
    EXPECT_ERRORS(FRONTEND POOL "first_byte_timeout = 5\n",
                  "t.ini:6: first_byte_timeout: \"5\" needs a unit (ms, s, m or h)\n");
    EXPECT_ERRORS(FRONTEND POOL "first_byte_timeout = 2h\n",
                  "t.ini:6: first_byte_timeout: 2h is out of range (0..1h)\n");
    /* first_byte_timeout without outlier: it would be ignored */
    EXPECT_ERRORS(FRONTEND POOL "first_byte_timeout = 2s\n",
                  "t.ini:6: first_byte_timeout needs outlier (it says when a silent server "
                  "counts as an outlier error, and closes nothing)\n");
    EXPECT_ERRORS(FRONTEND POOL "first_byte_timeout = 2s\noutlier =\n",
                  "t.ini:6: first_byte_timeout needs outlier (it says when a silent server "
                  "counts as an outlier error, and closes nothing)\n");
    /* a rejected outlier is reported once, not again as "needs outlier" */
    EXPECT_ERRORS(FRONTEND POOL "first_byte_timeout = 2s\noutlier = errors:0\n",
                  "t.ini:7: outlier: errors 0 is out of range (1..1000)\n");
}

int
main(void)
{
    test_parse();
    test_load();
    test_load_errors();
    return CHECK_DONE();
}
