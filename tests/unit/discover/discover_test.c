/* Tests discover/discover.c, the seam every source goes through: dsc_new
 * makes a source's state without running it, dsc_start starts it, results
 * reach the caller's callback as the source gives them, dsc_free frees the
 * state; dsc_spec_equal compares the source first, then by the source's
 * rule. A source of this file (a list of servers it is handed) stands for
 * one that is not DNS; the DNS sources' own rule (dsc_dns.c) is checked
 * on its specs, and their new on a real event base that never runs. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "check.h"
#include "dsc_dns.h"

/* ------------------------------------------------- a source of the test */

struct list_state {
    struct dsc_spec *spec;
    dsc_result_pt fn;
    void *arg;
    bool is_started;
};

static int list_news, list_starts, list_frees;
static struct list_state *list_last;

static void *
list_new(struct event_base *base, struct dsc_spec *spec, dsc_result_pt fn, void *arg)
{
    struct list_state *st = calloc(1, sizeof(*st));

    list_news++;
    if (st == NULL || strcmp(spec->name, "refuse") == 0) {
        free(st);
        return NULL;
    }
    st->spec = spec;
    st->fn = fn;
    st->arg = arg;
    spec->port = 7;                     /* a canonical form dsc_spec_of shows */
    list_last = st;
    return st;
}

static int
list_start(void *state)
{
    struct list_state *st = state;

    list_starts++;
    st->is_started = true;
    return 0;
}

static void
list_free(void *state)
{
    list_frees++;
    free(state);
}

static bool
list_spec_equal(const struct dsc_spec *a, const struct dsc_spec *b)
{
    return strcmp(a->name, b->name) == 0;   /* case matters here */
}

static const struct dsc_source list_source = {
    .name = "list",
    .new = list_new,
    .start = list_start,
    .free = list_free,
    .spec_equal = list_spec_equal,
};

/* ------------------------------------------------------------- results */

struct seen {
    int calls;
    size_t n;
    char first[DSC_SERVER_NAME_MAX + 1];
    char error[64];
};

static void
on_result(void *arg, const struct dsc_server *servers, size_t n, const char *error)
{
    struct seen *s = arg;

    s->calls++;
    s->n = n;
    snprintf(s->first, sizeof(s->first), "%s", n > 0 ? servers[0].name : "");
    snprintf(s->error, sizeof(s->error), "%s", error != NULL ? error : "");
}

static struct dsc_spec
spec_of(const struct dsc_source *source, const char *name)
{
    struct dsc_spec sp;

    memset(&sp, 0, sizeof(sp));
    sp.source = source;
    snprintf(sp.name, sizeof(sp.name), "%s", name);
    sp.interval_ms = 1000;
    return sp;
}

static void
test_lifecycle(void)
{
    struct dsc_spec sp = spec_of(&list_source, "web");
    struct seen seen = { 0 };
    struct dsc *d = dsc_new(NULL, &sp, on_result, &seen);
    const struct dsc_server one = { .name = "a", .address = "127.0.0.1:1", .weight = 1 };

    CHECK(d != NULL);
    if (d == NULL)
        return;
    /* new makes the state and runs nothing */
    CHECK_EQ_INT(list_news, 1);
    CHECK_EQ_INT(list_starts, 0);
    CHECK_EQ_INT(seen.calls, 0);
    /* the dsc keeps its own copy, which the source wrote to its form */
    CHECK(dsc_spec_of(d) != &sp);
    CHECK_EQ_STR(dsc_spec_of(d)->name, "web");
    CHECK_EQ_INT(dsc_spec_of(d)->port, 7);
    CHECK_EQ_INT(sp.port, 0);
    CHECK(list_last->spec == dsc_spec_of(d));
    CHECK_EQ_INT(dsc_start(d), 0);
    CHECK(list_last->is_started);
    /* the result contract passes through untouched */
    list_last->fn(list_last->arg, &one, 1, NULL);
    CHECK_EQ_INT(seen.calls, 1);
    CHECK_EQ_INT(seen.n, 1);
    CHECK_EQ_STR(seen.first, "a");
    list_last->fn(list_last->arg, NULL, 0, "web: empty answer");
    CHECK_EQ_INT(seen.calls, 2);
    CHECK_EQ_STR(seen.error, "web: empty answer");
    dsc_free(d);
    CHECK_EQ_INT(list_frees, 1);
    dsc_free(NULL);
    CHECK_EQ_INT(list_frees, 1);

    /* a source that cannot make one: NULL, nothing to free */
    sp = spec_of(&list_source, "refuse");
    CHECK(dsc_new(NULL, &sp, on_result, &seen) == NULL);
    CHECK_EQ_INT(list_frees, 1);
}

static void
test_spec_equal(void)
{
    struct dsc_spec a = spec_of(&list_source, "web"), b = a;
    struct dsc_spec srv = spec_of(&dsc_dns_srv, "_web._tcp.Example.");
    struct dsc_spec srv2 = spec_of(&dsc_dns_srv, "_web._tcp.example");
    struct dsc_spec arec = spec_of(&dsc_dns_a, "_web._tcp.example");
    struct sockaddr_in *v4 = (struct sockaddr_in *)&srv.endpoint;

    /* by the source's own rule */
    CHECK(dsc_spec_equal(&a, &b));
    snprintf(b.name, sizeof(b.name), "Web");
    CHECK(!dsc_spec_equal(&a, &b));
    /* another source is never equal, whatever its fields */
    b = a;
    b.source = &dsc_dns_srv;
    CHECK(!dsc_spec_equal(&a, &b));
    CHECK(!dsc_spec_equal(&srv2, &arec));

    /* DNS: one name in any case, with or without its final dot */
    v4->sin_family = AF_INET;
    v4->sin_port = htons(53);
    v4->sin_addr.s_addr = htonl(0x7f000001);
    srv.endpoint_len = sizeof(*v4);
    srv2.endpoint = srv.endpoint;
    srv2.endpoint_len = srv.endpoint_len;
    CHECK(dsc_spec_equal(&srv, &srv2));
    CHECK(dsc_spec_equal(&srv2, &srv));
    snprintf(srv2.name, sizeof(srv2.name), "_web._tcp.example..");
    CHECK(!dsc_spec_equal(&srv, &srv2));
    snprintf(srv2.name, sizeof(srv2.name), "_web._tcp.example.org");
    CHECK(!dsc_spec_equal(&srv, &srv2));
    snprintf(srv2.name, sizeof(srv2.name), "_web._tcp.example");
    /* ... and the same port, interval and DNS server */
    srv2.port = 80;
    CHECK(!dsc_spec_equal(&srv, &srv2));
    srv2.port = 0;
    srv2.interval_ms = 2000;
    CHECK(!dsc_spec_equal(&srv, &srv2));
    srv2.interval_ms = srv.interval_ms;
    ((struct sockaddr_in *)&srv2.endpoint)->sin_port = htons(5353);
    CHECK(!dsc_spec_equal(&srv, &srv2));
    ((struct sockaddr_in *)&srv2.endpoint)->sin_port = htons(53);
    CHECK(dsc_spec_equal(&srv, &srv2));
}

/* The DNS sources through the seam: new writes the name as the answers
 * spell it and sends nothing before start (the base never runs here). */
static void
test_dns_new(void)
{
    struct event_base *base = event_base_new();
    struct dsc_spec sp = spec_of(&dsc_dns_srv, "_Web._TCP.Example.");
    struct seen seen = { 0 };
    struct dsc *d;

    CHECK(base != NULL);
    if (base == NULL)
        return;
    d = dsc_new(base, &sp, on_result, &seen);
    CHECK(d != NULL);
    if (d != NULL) {
        CHECK_EQ_STR(dsc_spec_of(d)->name, "_web._tcp.example");
        CHECK_EQ_STR(sp.name, "_Web._TCP.Example.");
        /* the form a reload compares against the file's spelling */
        CHECK(dsc_spec_equal(dsc_spec_of(d), &sp));
        /* nothing is pending before start: the loop has nothing to run */
        CHECK_EQ_INT(event_base_loop(base, EVLOOP_NONBLOCK), 1);
        CHECK_EQ_INT(seen.calls, 0);
    }
    dsc_free(d);
    event_base_free(base);
}

int
main(void)
{
    test_lifecycle();
    test_spec_equal();
    test_dns_new();
    return CHECK_DONE();
}
