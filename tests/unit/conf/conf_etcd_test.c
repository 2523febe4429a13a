/*
 * conf_etcd_test.c - the keys of discover = etcd and of ephemeral servers:
 * discover_endpoints' URLs (conf_endpoints_parse: schemes, hosts, ports,
 * exact messages), and whole files: what etcd needs, the keys of the other
 * discovery refused, user and password together, a CA only for https,
 * ephemeral_delete_after against heartbeat_ttl.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf_fixture.h"
#include "conf.h"

#define FRONTEND "[frontend web]\nlisten = 127.0.0.1:8080\npool = web\n"
#define POOL "[pool web]\n"                                         /* line 4 */

struct url_case {
    const char *in;
    int n;                          /* -1: refused with err */
    struct conf_endpoint first;
    const char *err;
};

static const struct url_case url_cases[] = {
    { "http://127.0.0.1:2379", 1, { false, "127.0.0.1", 2379 }, NULL },
    { "https://etcd.example:2380/", 1, { true, "etcd.example", 2380 }, NULL },
    { "http://etcd", 1, { false, "etcd", 2379 }, NULL },
    { "http://[::1]:2379", 1, { false, "::1", 2379 }, NULL },
    { "http://[::1]", 1, { false, "::1", 2379 }, NULL },
    { " http://a:1 , https://b:2,http://c:3 ", 3, { false, "a", 1 }, NULL },
    { "", -1, { 0 }, "\"\" has an empty URL (URLs are separated by commas)" },
    { "http://a:1,", -1, { 0 }, "\"http://a:1,\" has an empty URL (URLs are separated by commas)" },
    { "127.0.0.1:2379", -1, { 0 }, "\"127.0.0.1:2379\" is not an http:// or https:// URL" },
    { "ftp://a:1", -1, { 0 }, "\"ftp://a:1\" is not an http:// or https:// URL" },
    { "http://", -1, { 0 }, "\"http://\" is not an http:// or https:// URL" },
    { "http://:2379", -1, { 0 }, "\"http://:2379\": no host, or a path (give scheme://host:port)" },
    { "http://a/v3", -1, { 0 }, "\"http://a/v3\": no host, or a path (give scheme://host:port)" },
    { "http://a:0", -1, { 0 }, "\"http://a:0\": the port is not 1 to 65535" },
    { "http://a:65536", -1, { 0 }, "\"http://a:65536\": the port is not 1 to 65535" },
    { "http://a:x", -1, { 0 }, "\"http://a:x\": the port is not 1 to 65535" },
    { "http://a:", -1, { 0 }, "\"http://a:\": the port is not 1 to 65535" },
    { "http://a:-1", -1, { 0 }, "\"http://a:-1\": the port is not 1 to 65535" },
    { "http://[::1:2379", -1, { 0 }, "\"http://[::1:2379\": an IPv6 address without its ']'" },
    { "http://[::1]x", -1, { 0 }, "\"http://[::1]x\": junk after the address" },
    { "http://a,http://b,http://c,http://d,http://e,http://f,http://g,http://h,http://i", -1,
      { 0 }, "more than 8 URLs" },
};

static void
test_urls(void)
{
    for (size_t i = 0; i < sizeof(url_cases) / sizeof(url_cases[0]); i++) {
        const struct url_case *uc = &url_cases[i];
        struct conf_endpoint out[CONF_ENDPOINTS_MAX];
        char err[512] = "";
        int n = conf_endpoints_parse(uc->in, out, CONF_ENDPOINTS_MAX, err, sizeof(err));

        CHECK_EQ_INT(n, uc->n);
        if (n != uc->n)
            fprintf(stderr, "  (case \"%s\": %s)\n", uc->in, err);
        if (uc->n < 0) {
            CHECK_EQ_STR(err, uc->err);
            continue;
        }
        if (n < 1)
            continue;
        CHECK(out[0].is_tls == uc->first.is_tls);
        CHECK_EQ_STR(out[0].host, uc->first.host);
        CHECK_EQ_INT(out[0].port, uc->first.port);
    }
}

static void
test_files(void)
{
    char *errors;
    struct conf *c = conf_fixture_load(FRONTEND POOL "discover = etcd\n"
                                       "discover_prefix = /services/web/\n", &errors);

    CHECK(c != NULL);
    if (c != NULL) {
        CHECK(c->pools[0].discover == CONF_DISCOVER_ETCD);
        CHECK_EQ_STR(c->pools[0].discover_endpoints, "http://127.0.0.1:2379");
        CHECK_EQ_STR(c->pools[0].discover_prefix, "/services/web/");
        CHECK_EQ_INT(c->pools[0].ephemeral_delete_after_ms, 30000);
    }
    conf_free(c);
    free(errors);

    EXPECT_ERRORS(FRONTEND POOL "discover = etcd\n",
                  "t.ini:5: pool web: discover = etcd needs discover_prefix (e.g. "
                  "/services/web/)\n");
    EXPECT_ERRORS(FRONTEND POOL "discover = etcd\ndiscover_prefix = /s/\n"
                  "discover_endpoints = 10.0.0.1:2379\n",
                  "t.ini:7: discover_endpoints: \"10.0.0.1:2379\" is not an http:// or https:// "
                  "URL\n");
    EXPECT_ERRORS(FRONTEND POOL "discover = etcd\ndiscover_prefix = /s/\n"
                  "discover_name = web.example\n",
                  "t.ini:7: discover_name is for discover = dns-srv or dns-a\n");
    EXPECT_ERRORS(FRONTEND POOL "server = a 127.0.0.1:1\ndiscover_prefix = /s/\n",
                  "t.ini:6: discover_prefix is for discover = etcd\n");
    EXPECT_ERRORS(FRONTEND POOL "discover = etcd\ndiscover_prefix = /s/\ndiscover_user = lb\n",
                  "t.ini:7: pool web: discover_user and discover_password go together\n");
    EXPECT_ERRORS(FRONTEND POOL "discover = etcd\ndiscover_prefix = /s/\n"
                  "discover_tls_ca = /etc/ssl/ca.pem\n",
                  "t.ini:7: discover_tls_ca needs an https:// URL in discover_endpoints\n");
    EXPECT_ERRORS(FRONTEND POOL "server = a 127.0.0.1:1\nheartbeat_ttl = 15s\n"
                  "ephemeral_delete_after = 10s\n",
                  "t.ini:7: ephemeral_delete_after: at least heartbeat_ttl (15000 ms)\n");
}

int
main(void)
{
    test_urls();
    test_files();
    return CHECK_DONE();
}
