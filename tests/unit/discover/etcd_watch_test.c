/* Tests discover/etcd_watch.c: the watch stream cut at every byte gives
 * the same objects as whole (braces in strings, escapes, junk, the size
 * limit), the watch, range and authenticate answers as etcd 3.4's gateway
 * writes them (captured from it), the request bodies, and the server a
 * key's value names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dsc_etcd.h"

/* ------------------------------------------------------------ the stream */

struct seen {
    char text[4096];                    /* the objects, '|' between them */
    int n;
};

static int
collect(void *arg, const char *obj, size_t len)
{
    struct seen *s = arg;
    size_t at = strlen(s->text);

    snprintf(s->text + at, sizeof(s->text) - at, "%s%.*s", s->n > 0 ? "|" : "", (int)len, obj);
    s->n++;
    return 0;
}

/* Feeds text whole, then cut at every offset, then byte by byte: the same
 * objects each time. Returns the feed's result. */
static int
feed_all_ways(const char *text, size_t max, struct seen *whole)
{
    size_t n = strlen(text);
    struct dsc_etcd_stream s;
    char err[120];
    int rc;

    memset(whole, 0, sizeof(*whole));
    dsc_etcd_stream_init(&s, max);
    rc = dsc_etcd_stream_feed(&s, text, n, collect, whole, err, sizeof(err));
    dsc_etcd_stream_fini(&s);
    for (size_t cut = 0; cut <= n; cut++) {
        struct seen split = { 0 };
        int rc2;

        dsc_etcd_stream_init(&s, max);
        rc2 = dsc_etcd_stream_feed(&s, text, cut, collect, &split, err, sizeof(err));
        if (rc2 == 0)
            rc2 = dsc_etcd_stream_feed(&s, text + cut, n - cut, collect, &split, err,
                                       sizeof(err));
        dsc_etcd_stream_fini(&s);
        CHECK_EQ_INT(rc2, rc);
        CHECK_EQ_STR(split.text, whole->text);
    }
    {
        struct seen bytes = { 0 };
        int rc3 = 0;

        dsc_etcd_stream_init(&s, max);
        for (size_t i = 0; i < n && rc3 == 0; i++)
            rc3 = dsc_etcd_stream_feed(&s, text + i, 1, collect, &bytes, err, sizeof(err));
        dsc_etcd_stream_fini(&s);
        CHECK_EQ_INT(rc3, rc);
        CHECK_EQ_STR(bytes.text, whole->text);
    }
    return rc;
}

static void
test_stream(void)
{
    struct seen w;

    CHECK_EQ_INT(feed_all_ways("{\"a\":1}\n{\"b\":[1,{\"c\":2}]}\n", 1024, &w), 0);
    CHECK_EQ_INT(w.n, 2);
    CHECK_EQ_STR(w.text, "{\"a\":1}|{\"b\":[1,{\"c\":2}]}");
    /* braces and escaped quotes inside strings do not count */
    CHECK_EQ_INT(feed_all_ways("{\"k\":\"}{\\\"}\\\\\"} \r\n\t{}", 1024, &w), 0);
    CHECK_EQ_STR(w.text, "{\"k\":\"}{\\\"}\\\\\"}|{}");
    /* an unfinished object is held, not handed out */
    CHECK_EQ_INT(feed_all_ways("{\"a\":1}{\"b\":", 1024, &w), 0);
    CHECK_EQ_INT(w.n, 1);
    /* junk between objects breaks the stream, after what came before */
    CHECK_EQ_INT(feed_all_ways("{\"a\":1}x{\"b\":2}", 1024, &w), -1);
    CHECK_EQ_STR(w.text, "{\"a\":1}");
    /* an object past the limit too */
    CHECK_EQ_INT(feed_all_ways("{\"a\":1}{\"long\":\"0123456789\"}", 16, &w), -1);
    CHECK_EQ_INT(w.n, 1);
}

/* ------------------------------------------------------------ answers */

static void
test_watch_parse(void)
{
    /* etcd 3.4's gateway: a created answer, then events (PUT's type is the
     * enum's zero value: left out), then a compaction */
    static const char created[] =
        "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"3\","
        "\"raft_term\":\"2\"},\"created\":true}}";
    static const char events[] =
        "{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":[{\"kv\":{\"key\":"
        "\"L3NlcnZpY2VzL3dlYi9h\",\"create_revision\":\"2\",\"mod_revision\":\"4\","
        "\"version\":\"1\",\"value\":\"MTI3LjAuMC4xOjkwMDE=\"}},{\"type\":\"DELETE\",\"kv\":"
        "{\"key\":\"L3NlcnZpY2VzL3dlYi9i\",\"mod_revision\":\"5\"}}]}}";
    static const char compacted[] =
        "{\"result\":{\"header\":{\"raft_term\":\"3\"},\"canceled\":true,"
        "\"compact_revision\":\"13\"}}";
    static const char error[] =
        "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"transport is closing\","
        "\"http_status\":\"Service Unavailable\"}}";
    struct dsc_etcd_watch_msg m;
    char err[120];

    CHECK_EQ_INT(dsc_etcd_watch_parse(created, strlen(created), &m, err, sizeof(err)), 0);
    CHECK(m.is_created && !m.is_canceled && m.nevents == 0);
    CHECK_EQ_INT(m.revision, 3);
    dsc_etcd_watch_fini(&m);

    CHECK_EQ_INT(dsc_etcd_watch_parse(events, strlen(events), &m, err, sizeof(err)), 0);
    CHECK_EQ_INT(m.nevents, 2);
    CHECK_EQ_INT(m.revision, 5);
    CHECK_EQ_STR(m.events[0].key, "/services/web/a");
    CHECK_EQ_STR(m.events[0].value, "127.0.0.1:9001");
    CHECK_EQ_INT(m.events[0].mod_revision, 4);
    CHECK(!m.events[0].is_delete);
    CHECK_EQ_STR(m.events[1].key, "/services/web/b");
    CHECK(m.events[1].is_delete);
    CHECK_EQ_INT(m.events[1].value_len, 0);
    dsc_etcd_watch_fini(&m);

    CHECK_EQ_INT(dsc_etcd_watch_parse(compacted, strlen(compacted), &m, err, sizeof(err)), 0);
    CHECK(m.is_canceled);
    CHECK_EQ_INT(m.compact_revision, 13);
    dsc_etcd_watch_fini(&m);

    CHECK_EQ_INT(dsc_etcd_watch_parse(error, strlen(error), &m, err, sizeof(err)), 0);
    CHECK(m.is_error);
    CHECK_EQ_STR(m.reason, "transport is closing");
    dsc_etcd_watch_fini(&m);

    /* malformed: not JSON, not base64, a wrong type, no result */
    static const char *const bad[] = {
        "{\"result\":",
        "[1]",
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"!!\"}}]}}",
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ=\",\"value\":1}}]}}",
        "{\"result\":{\"events\":[{\"type\":\"EXPIRE\",\"kv\":{\"key\":\"YQ==\"}}]}}",
        "{\"result\":{\"header\":{\"revision\":\"x1\"}}}",
        "{\"result\":{\"events\":{}}}",
        "{\"other\":1}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(dsc_etcd_watch_parse(bad[i], strlen(bad[i]), &m, err, sizeof(err)), -1);
        CHECK(err[0] != '\0');
    }
}

static void
test_range_and_token(void)
{
    static const char range[] =
        "{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":\"L3NlcnZpY2VzL3dlYi9h\","
        "\"mod_revision\":\"2\",\"value\":\"MTI3LjAuMC4xOjkwMDE=\"},{\"key\":"
        "\"L3NlcnZpY2VzL3dlYi9i\",\"value\":\"eyJhZGRyZXNzIjoiMTI3LjAuMC4xOjkwMDIiLCJ3ZWlnaHQiOjN9\""
        "}],\"count\":\"2\"}";
    static const char empty[] = "{\"header\":{\"revision\":\"7\"}}";
    static const char denied[] =
        "{\"error\":\"etcdserver: permission denied\",\"message\":\"etcdserver: permission "
        "denied\",\"code\":7}";
    struct dsc_etcd_range r;
    char err[120], token[64], text[64];

    CHECK_EQ_INT(dsc_etcd_range_parse(range, strlen(range), &r, err, sizeof(err)), 0);
    CHECK_EQ_INT(r.revision, 3);
    CHECK_EQ_INT(r.nkvs, 2);
    CHECK(!r.is_more);
    CHECK_EQ_STR(r.kvs[1].value, "{\"address\":\"127.0.0.1:9002\",\"weight\":3}");
    dsc_etcd_range_fini(&r);
    CHECK_EQ_INT(dsc_etcd_range_parse(empty, strlen(empty), &r, err, sizeof(err)), 0);
    CHECK_EQ_INT(r.nkvs, 0);
    dsc_etcd_range_fini(&r);
    CHECK_EQ_INT(dsc_etcd_range_parse(denied, strlen(denied), &r, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "etcdserver: permission denied");

    CHECK_EQ_INT(dsc_etcd_token_parse("{\"header\":{},\"token\":\"abc.7\"}", 29, token,
                                      sizeof(token), err, sizeof(err)), 0);
    CHECK_EQ_STR(token, "abc.7");
    CHECK_EQ_INT(dsc_etcd_token_parse(denied, strlen(denied), token, sizeof(token), err,
                                      sizeof(err)), -1);
    CHECK_EQ_STR(err, "etcdserver: permission denied");
    dsc_etcd_error_text(denied, strlen(denied), text, sizeof(text));
    CHECK_EQ_STR(text, "etcdserver: permission denied");
    dsc_etcd_error_text("Not Found\n", 10, text, sizeof(text));
    CHECK_EQ_STR(text, "Not Found ");
}

static void
test_bodies(void)
{
    char *b;

    /* "/services/web/" and "/services/web0": every key under the prefix */
    b = dsc_etcd_range_body("/services/web/");
    CHECK_EQ_STR(b, "{\"key\":\"L3NlcnZpY2VzL3dlYi8=\",\"range_end\":\"L3NlcnZpY2VzL3dlYjA=\"}");
    free(b);
    b = dsc_etcd_watch_body("/services/web/", 8);
    CHECK_EQ_STR(b, "{\"create_request\":{\"key\":\"L3NlcnZpY2VzL3dlYi8=\",\"range_end\":"
                    "\"L3NlcnZpY2VzL3dlYjA=\",\"start_revision\":\"8\"}}");
    free(b);
    /* a last byte of 0xff: the one before goes up, the 0xff goes */
    b = dsc_etcd_range_body("a\xff");
    CHECK_EQ_STR(b, "{\"key\":\"Yf8=\",\"range_end\":\"Yg==\"}");
    free(b);
    b = dsc_etcd_auth_body("lb", "p\"w");
    CHECK_EQ_STR(b, "{\"name\":\"lb\",\"password\":\"p\\\"w\"}");
    free(b);
}

/* ------------------------------------------------------------ values */

static int
server_of(const char *key, const char *value, struct dsc_server *out, char *err, size_t errlen)
{
    struct dsc_etcd_kv kv = { .key = (char *)key, .value = (char *)value,
                              .key_len = strlen(key), .value_len = strlen(value) };

    return dsc_etcd_server_parse(&kv, out, err, errlen);
}

static void
test_values(void)
{
    struct dsc_server s;
    char err[160];

    CHECK_EQ_INT(server_of("/services/web/web1", "10.0.0.9:8080", &s, err, sizeof(err)), 0);
    CHECK_EQ_STR(s.name, "web1");
    CHECK_EQ_STR(s.address, "10.0.0.9:8080");
    CHECK_EQ_INT(s.weight, 1);
    CHECK_EQ_INT(server_of("/s/v6", " [::1]:80\n", &s, err, sizeof(err)), 0);
    CHECK_EQ_STR(s.address, "[::1]:80");
    CHECK_EQ_INT(server_of("/s/j", "{\"address\":\"10.0.0.9:8080\",\"weight\":7}", &s, err,
                           sizeof(err)), 0);
    CHECK_EQ_STR(s.address, "10.0.0.9:8080");
    CHECK_EQ_INT(s.weight, 7);
    CHECK_EQ_INT(server_of("/s/j", "{\"address\":\"10.0.0.9:8080\"}", &s, err, sizeof(err)), 0);
    CHECK_EQ_INT(s.weight, 1);
    CHECK_EQ_INT(server_of("flat", "10.0.0.9:1", &s, err, sizeof(err)), 0);
    CHECK_EQ_STR(s.name, "flat");

    static const struct {
        const char *key, *value, *why;
    } bad[] = {
        { "/s/a", "nonsense", "no :PORT" },
        { "/s/a", "db.example:5432", "is not an IPv4 address" },
        { "/s/a", "10.0.0.9:0", "port is not 1 to 65535" },
        { "/s/a", "10.0.0.9:65536", "port is not 1 to 65535" },
        { "/s/a", "10.0.0.9:80x", "port is not 1 to 65535" },
        { "/s/a", "[::1:80", "not [IPv6]:PORT" },
        { "/s/a", "", "an empty address" },
        { "/s/a", "{\"address\":\"10.0.0.9:80\",\"weight\":0}", "weight" },
        { "/s/a", "{\"address\":\"10.0.0.9:80\",\"weight\":\"2\"}", "weight" },
        { "/s/a", "{\"addr\":\"10.0.0.9:80\"}", "no \"address\"" },
        { "/s/a", "{\"address\":", "not a JSON object" },
        { "/s/", "10.0.0.9:80", "not a server name" },
        { "/s/bad name", "10.0.0.9:80", "is not a server name" },
        { "/s/0123456789012345678901234567890123456789012345678901234567890123", "10.0.0.9:80",
          "not a server name" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(server_of(bad[i].key, bad[i].value, &s, err, sizeof(err)), -1);
        if (strstr(err, bad[i].why) == NULL) {
            fprintf(stderr, "case %zu: \"%s\" lacks \"%s\"\n", i, err, bad[i].why);
            check_failures++;
        }
    }
}

int
main(void)
{
    test_stream();
    test_watch_parse();
    test_range_and_token();
    test_bodies();
    test_values();
    return CHECK_DONE();
}
