/*
 * fuzz_etcd_watch.c - the reader of etcd's watch stream (etcd_watch.c) on
 * what an etcd endpoint, or anyone who answers in its place, may send.
 *
 * The input is fed whole, then cut in two at every offset: each feeding
 * must hand out the same objects in the same order and end the same way
 * (TCP cuts a stream anywhere). Each object is then parsed as a watch
 * answer and its keys as servers: whatever comes back must be sane.
 */
#include "dsc_etcd.h"
#include "fuzz.h"

#define FUZZ_OBJECT_MAX 2048            /* small: the limit is reached too */

struct seen {
    uint64_t hash;                      /* of the objects and their bounds */
    size_t n;
};

static int
collect(void *arg, const char *obj, size_t len)
{
    struct seen *s = arg;

    FUZZ_CHECK(len >= 2 && obj[0] == '{' && len <= FUZZ_OBJECT_MAX);
    for (size_t i = 0; i < len; i++)
        s->hash = (s->hash ^ (unsigned char)obj[i]) * 1099511628211ull;
    s->hash = (s->hash ^ 0x100) * 1099511628211ull;     /* the bound */
    s->n++;
    return 0;
}

static int
check_object(void *arg, const char *obj, size_t len)
{
    struct dsc_etcd_watch_msg m;
    char err[200];

    if (dsc_etcd_watch_parse(obj, len, &m, err, sizeof(err)) != 0) {
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(m.nevents == 0 || m.events != NULL);
    for (size_t i = 0; i < m.nevents; i++) {
        struct dsc_server s;

        FUZZ_CHECK(m.events[i].key != NULL && m.events[i].value != NULL);
        FUZZ_CHECK(m.events[i].key[m.events[i].key_len] == '\0');
        if (dsc_etcd_server_parse(&m.events[i], &s, err, sizeof(err)) == 0) {
            FUZZ_CHECK(s.name[0] != '\0' && strlen(s.name) <= DSC_SERVER_NAME_MAX);
            FUZZ_CHECK(s.address[0] != '\0' && s.weight >= 1);
        } else {
            FUZZ_CHECK(err[0] != '\0');
        }
    }
    dsc_etcd_watch_fini(&m);
    return 0;
}

static int
feed(const uint8_t *data, size_t cut, size_t size, struct seen *out, bool *is_pending)
{
    struct dsc_etcd_stream s;
    char err[120];
    int rc;

    memset(out, 0, sizeof(*out));
    dsc_etcd_stream_init(&s, FUZZ_OBJECT_MAX);
    rc = dsc_etcd_stream_feed(&s, (const char *)data, cut, collect, out, err, sizeof(err));
    if (rc == 0)
        rc = dsc_etcd_stream_feed(&s, (const char *)data + cut, size - cut, collect, out, err,
                                  sizeof(err));
    if (rc != 0)
        FUZZ_CHECK(err[0] != '\0');
    *is_pending = dsc_etcd_stream_is_pending(&s);
    dsc_etcd_stream_fini(&s);
    return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dsc_etcd_stream s;
    struct seen whole, split;
    bool pending, split_pending;
    char err[120];
    int rc;

    if (size > 4096)                    /* every cut: quadratic */
        return 0;
    rc = feed(data, size, size, &whole, &pending);
    for (size_t cut = 0; cut < size; cut++) {
        FUZZ_CHECK(feed(data, cut, size, &split, &split_pending) == rc);
        FUZZ_CHECK(split.n == whole.n && split.hash == whole.hash);
        FUZZ_CHECK(split_pending == pending || rc != 0);
    }
    dsc_etcd_stream_init(&s, FUZZ_OBJECT_MAX);
    (void)dsc_etcd_stream_feed(&s, (const char *)data, size, check_object, NULL, err,
                               sizeof(err));
    dsc_etcd_stream_fini(&s);
    return 0;
}
