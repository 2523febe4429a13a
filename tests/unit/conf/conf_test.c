/*
 * conf_test.c - conf_load on files written to a temporary directory: good
 * configs and their values, defaults, and each bad case with its exact
 * "FILE:LINE: message" output. Expected outputs write the path as "@".
 * Every case also goes through conf_load_text on the same bytes.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "conf.h"
#include "conf_keys.h"

static char dir[64];
static char path[128];

static void
write_file(const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

/* exp with each "@:" starting with the file's path. */
static char *
expand(const char *exp)
{
    size_t n = strlen(exp) + 1, i;
    char *s, *o;

    /* "@:" is the file; an '@' elsewhere is itself (server names may hold
     * one) */
    for (i = 0; exp[i] != '\0'; i++)
        if (exp[i] == '@' && exp[i + 1] == ':')
            n += strlen(path);
    s = o = malloc(n);
    for (i = 0; exp[i] != '\0'; i++) {
        if (exp[i] == '@' && exp[i + 1] == ':') {
            strcpy(o, path);
            o += strlen(path);
        } else {
            *o++ = exp[i];
        }
    }
    *o = '\0';
    return s;
}

/* Loads len bytes of data, expects failure with exactly the errors exp. */
static void
expect_errors_n(int line, const char *data, size_t len, const char *exp)
{
    struct conf *c = (struct conf *)1;
    char *errors = NULL, *want = expand(exp);
    int before = check_failures;

    write_file(data, len);
    CHECK_EQ_INT(conf_load(path, &c, &errors), -1);
    CHECK(c == NULL);
    CHECK_EQ_STR(errors, want);
    free(errors);
    /* From memory, the same bytes under the same name say the same. */
    c = (struct conf *)1;
    errors = NULL;
    CHECK_EQ_INT(conf_load_text(path, data, len, &c, &errors), -1);
    CHECK(c == NULL);
    CHECK_EQ_STR(errors, want);
    if (check_failures != before)
        fprintf(stderr, "  (case at conf_test.c:%d)\n", line);
    free(errors);
    free(want);
}

#define EXPECT_ERRORS(text, exp) \
    expect_errors_n(__LINE__, text, strlen(text), exp)

/* Loads text, expects success; the caller frees the result. */
static struct conf *
load_ok_n(int line, const char *text)
{
    struct conf *c = NULL, *mem = NULL;
    char *errors = NULL;

    write_file(text, strlen(text));
    if (conf_load(path, &c, &errors) != 0) {
        fprintf(stderr, "conf_test.c:%d: conf_load failed:\n%s", line,
                errors ? errors : "(no message)\n");
        check_failures++;
    }
    CHECK(errors == NULL);
    free(errors);
    errors = NULL;
    /* From memory too (the file's result is the one returned). */
    if (conf_load_text(path, text, strlen(text), &mem, &errors) != 0) {
        fprintf(stderr, "conf_test.c:%d: conf_load_text failed:\n%s", line,
                errors ? errors : "(no message)\n");
        check_failures++;
    }
    CHECK(errors == NULL);
    CHECK(mem == NULL || strcmp(mem->file, path) == 0);
    free(errors);
    conf_free(mem);
    return c;
}

#define LOAD_OK(text) load_ok_n(__LINE__, text)

static uint16_t
port_of(const struct conf_addr *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

#define FRONTEND "[frontend web]\nlisten = 127.0.0.1:8080\npool = web\n"
#define POOL "[pool web]\nserver = web1 127.0.0.1:9001\n"

/* The shipped example must load, and say what it documents. */
static void
test_example(void)
{
    struct conf *c = NULL;
    char *errors = NULL;

    /* ctest runs unit tests from the source directory */
    CHECK_EQ_INT(conf_load("conf/lb.ini", &c, &errors), 0);
    if (errors)
        fprintf(stderr, "%s", errors);
    free(errors);
    if (c == NULL)
        return;
    CHECK_EQ_STR(c->file, "conf/lb.ini");
    CHECK(c->global.workers >= 1);
    CHECK_EQ_INT(c->global.max_connections, 10000);
    CHECK_EQ_STR(c->admin.listen.text, "127.0.0.1:9900");
    CHECK_EQ_INT(c->nfrontends, 1);
    CHECK_EQ_STR(c->frontends[0].name, "web");
    CHECK_EQ_STR(c->frontends[0].listen.text, "127.0.0.1:8080");
    CHECK_EQ_INT(c->npools, 1);
    CHECK_EQ_INT(c->pools[0].nservers, 3);
    if (c->pools[0].nservers == 3) {
        CHECK_EQ_STR(c->pools[0].servers[0].name, "web1");
        CHECK_EQ_STR(c->pools[0].servers[0].addr.text, "127.0.0.1:9001");
        CHECK_EQ_INT(c->pools[0].servers[0].weight, 3);
        CHECK_EQ_STR(c->pools[0].servers[1].name, "web2");
        CHECK_EQ_INT(c->pools[0].servers[1].weight, 1);
        CHECK_EQ_STR(c->pools[0].servers[2].addr.text, "127.0.0.1:9003");
    }
    CHECK_EQ_INT(c->pools[0].check, CONF_CHECK_TCP);
    conf_free(c);
}

static void
test_defaults(void)
{
    struct conf *c = LOAD_OK(FRONTEND POOL);
    const struct conf_pool *p;
    cpu_set_t cpus;

    if (c == NULL)
        return;
    CHECK(sched_getaffinity(0, sizeof(cpus), &cpus) == 0);
    CHECK_EQ_STR(c->file, path);
    CHECK_EQ_INT(c->global.workers, CPU_COUNT(&cpus));
    CHECK_EQ_INT(c->global.max_connections, 10000);
    CHECK_EQ_INT(c->global.log_level, CONF_LOG_INFO);
    CHECK_EQ_INT(c->global.shutdown_timeout_ms, 30000);
    CHECK_EQ_INT(c->health.threads, 2);
    CHECK_EQ_STR(c->admin.listen.text, "127.0.0.1:9900");
    CHECK_EQ_INT(c->admin.listen.ss.ss_family, AF_INET);
    CHECK_EQ_INT(c->admin.listen.len, sizeof(struct sockaddr_in));
    CHECK_EQ_INT(port_of(&c->admin.listen), 9900);
    CHECK_EQ_STR(c->admin.token, "");

    CHECK_EQ_INT(c->nfrontends, 1);
    CHECK_EQ_STR(c->frontends[0].name, "web");
    CHECK_EQ_INT(c->frontends[0].line, 1);
    CHECK_EQ_INT(c->frontends[0].listen_line, 2);
    CHECK_EQ_STR(c->frontends[0].pool_name, "web");
    CHECK_EQ_INT(c->frontends[0].pool_index, 0);
    CHECK_EQ_INT(port_of(&c->frontends[0].listen), 8080);

    CHECK_EQ_INT(c->npools, 1);
    p = &c->pools[0];
    CHECK_EQ_STR(p->name, "web");
    CHECK_EQ_INT(p->line, 4);
    CHECK_EQ_INT(p->nservers, 1);
    CHECK_EQ_STR(p->servers[0].name, "web1");
    CHECK_EQ_INT(p->servers[0].weight, 1);
    CHECK_EQ_INT(p->servers[0].line, 5);
    CHECK_EQ_INT(ntohs(p->servers[0].addr.sa.in.sin_port), 9001);
    CHECK_EQ_INT(p->balance, CONF_BALANCE_ROUNDROBIN);
    CHECK_EQ_INT(p->connect_timeout_ms, 1000);
    CHECK_EQ_INT(p->idle_timeout_ms, 300000);
    CHECK_EQ_INT(p->retries, 2);
    CHECK_EQ_INT(p->check, CONF_CHECK_TCP);
    CHECK_EQ_STR(p->check_path, "/");
    CHECK_EQ_STR(p->check_host, "");
    CHECK_EQ_INT(p->check_expect.nranges, 1);
    CHECK_EQ_INT(p->check_expect.ranges[0].lo, 200);
    CHECK_EQ_INT(p->check_expect.ranges[0].hi, 399);
    CHECK_EQ_INT(p->check_port, 0);
    CHECK_EQ_INT(p->check_interval_ms, 2000);
    CHECK_EQ_INT(p->check_timeout_ms, 1000);
    CHECK_EQ_INT(p->rise, 2);
    CHECK_EQ_INT(p->fall, 3);
    CHECK(!p->check_verify);
    CHECK_EQ_STR(p->check_ca, "");
    CHECK_EQ_INT(p->min_servers.value, 1);
    CHECK(!p->min_servers.is_percent);
    CHECK_EQ_INT(p->drain_timeout_ms, 30000);
    CHECK_EQ_INT(p->observe_errors, 3);
    conf_free(c);
}

/* workers = 0 counts the CPUs this process may run on (taskset, cpusets),
 * not the machine's. */
static void
test_workers_follow_affinity(void)
{
    cpu_set_t all, one;
    struct conf *c;
    int first = -1;

    CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++) {
        if (CPU_ISSET(i, &all))
            first = i;
    }
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
    c = LOAD_OK("[global]\nworkers = 0\n" FRONTEND POOL);
    CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
    if (c == NULL)
        return;
    CHECK_EQ_INT(c->global.workers, 1);
    conf_free(c);
}

/* Every key set to something other than its default lands in its field. */
static void
test_all_keys(void)
{
    struct conf *c = LOAD_OK(
        "[global]\n"
        "workers = 3\n"
        "max_connections = 1000000\n"
        "log_level = debug\n"
        "shutdown_timeout = 0\n"
        "[health]\n"
        "threads = 64\n"
        "[admin]\n"
        "listen = [::1]:9999\n"
        "token = s3cret value ; a comment\n"
        "[frontend web]\n"
        "listen = *:8080\n"
        "pool = api\n"
        "[frontend other]\n"
        "listen = 127.0.0.1:8081\n"
        "pool = web\n"
        "[pool web]\n"
        "server = web1 127.0.0.1:9001\n"
        "[pool api]\n"
        "balance = leastconn\n"
        "server = a1 127.0.0.1:9101 weight=256\n"
        "server = a2 [::1]:9102 weight=7\n"
        "connect_timeout = 250ms\n"
        "idle_timeout = 24h\n"
        "retries = 32\n"
        "check = https\n"
        "check_path = /healthz?x=1\n"
        "check_host = api.example\n"
        "check_expect = 200,204,300-302\n"
        "check_port = 65535\n"
        "check_interval = 1h\n"
        "check_timeout = 1h\n"
        "rise = 100\n"
        "fall = 1\n"
        "check_verify = yes\n"
        "check_ca = /etc/ssl/my ca.pem\n"
        "min_servers = 50%\n"
        "drain_timeout = 0\n"
        "observe_errors = 0\n");
    const struct conf_pool *p;

    if (c == NULL)
        return;
    CHECK_EQ_INT(c->global.workers, 3);
    CHECK_EQ_INT(c->global.max_connections, 1000000);
    CHECK_EQ_INT(c->global.log_level, CONF_LOG_DEBUG);
    CHECK_EQ_INT(c->global.shutdown_timeout_ms, 0);
    CHECK_EQ_INT(c->health.threads, 64);
    CHECK_EQ_INT(c->admin.listen.ss.ss_family, AF_INET6);
    CHECK_EQ_INT(port_of(&c->admin.listen), 9999);
    CHECK_EQ_STR(c->admin.token, "s3cret value");

    CHECK_EQ_INT(c->nfrontends, 2);
    CHECK_EQ_STR(c->frontends[0].listen.text, "*:8080");
    CHECK_EQ_INT(c->frontends[0].pool_index, 1);
    CHECK_EQ_INT(c->frontends[1].pool_index, 0);
    CHECK_EQ_INT(c->frontends[1].line, 14);

    CHECK_EQ_INT(c->npools, 2);
    p = &c->pools[1];
    CHECK_EQ_STR(p->name, "api");
    CHECK_EQ_INT(p->line, 19);
    CHECK_EQ_INT(p->balance, CONF_BALANCE_LEASTCONN);
    CHECK_EQ_INT(p->nservers, 2);
    CHECK_EQ_INT(p->servers[0].weight, 256);
    CHECK_EQ_INT(p->servers[1].weight, 7);
    CHECK_EQ_INT(p->servers[1].line, 22);
    CHECK_EQ_INT(p->servers[1].addr.sa.sa.sa_family, AF_INET6);
    CHECK_EQ_INT(p->connect_timeout_ms, 250);
    CHECK_EQ_INT(p->idle_timeout_ms, 86400000);
    CHECK_EQ_INT(p->retries, 32);
    CHECK_EQ_INT(p->check, CONF_CHECK_HTTPS);
    CHECK_EQ_STR(p->check_path, "/healthz?x=1");
    CHECK_EQ_STR(p->check_host, "api.example");
    CHECK_EQ_INT(p->check_expect.nranges, 3);
    CHECK_EQ_INT(p->check_expect.ranges[1].lo, 204);
    CHECK_EQ_INT(p->check_expect.ranges[2].hi, 302);
    CHECK_EQ_INT(p->check_port, 65535);
    CHECK_EQ_INT(p->check_interval_ms, 3600000);
    CHECK_EQ_INT(p->check_timeout_ms, 3600000);
    CHECK_EQ_INT(p->rise, 100);
    CHECK_EQ_INT(p->fall, 1);
    CHECK(p->check_verify);
    CHECK_EQ_STR(p->check_ca, "/etc/ssl/my ca.pem");
    CHECK_EQ_INT(p->min_servers.value, 50);
    CHECK(p->min_servers.is_percent);
    CHECK_EQ_INT(p->drain_timeout_ms, 0);
    CHECK_EQ_INT(p->observe_errors, 0);
    /* the other pool kept its defaults */
    CHECK_EQ_INT(c->pools[0].balance, CONF_BALANCE_ROUNDROBIN);
    CHECK_EQ_INT(c->pools[0].retries, 2);
    conf_free(c);
}

/* Line ends, BOM, comments and inih's quirks that are fine to keep. */
static void
test_syntax_ok(void)
{
    struct conf *c;

    c = LOAD_OK("\xef\xbb\xbf; BOM first\r\n"
                "[frontend web]\r\n"
                "listen = 127.0.0.1:8080\r\n"
                "pool = web\r\n"
                "\r\n"
                "  ; an indented comment\r\n"
                "# a hash comment\r\n"
                "[pool web] ; the pool\r\n"
                "server=web1 127.0.0.1:9001\r\n"
                "retries = 5 ; five\r\n"
                "check_path = /a;b\r\n"
                "balance = random");
    if (c != NULL) {
        CHECK_EQ_INT(c->pools[0].retries, 5);
        CHECK_EQ_STR(c->pools[0].check_path, "/a;b");
        CHECK_EQ_INT(c->pools[0].balance, CONF_BALANCE_RANDOM);
        CHECK_EQ_INT(c->pools[0].servers[0].line, 9);
        conf_free(c);
    }

    /* a name longer than inih's 49-byte section buffer still works */
    {
        char name[64], text[512];
        memset(name, 'n', 63);
        name[63] = '\0';
        snprintf(text, sizeof(text), "[frontend web]\n"
                 "listen = 127.0.0.1:8080\npool = %s\n"
                 "[pool %s]\nserver = s1 127.0.0.1:9001\n", name, name);
        c = LOAD_OK(text);
        if (c != NULL) {
            CHECK_EQ_STR(c->pools[0].name, name);
            CHECK_EQ_INT(c->pools[0].nservers, 1);
            conf_free(c);
        }
    }
}

static void
test_long_lines(void)
{
    char text[1024], pad[512];

    /* 198 characters and a newline fill inih's 200-byte buffer exactly */
    memset(pad, 'x', sizeof(pad));
    snprintf(text, sizeof(text), FRONTEND POOL "check_host = %.*s\n",
             198 - 13, pad);
    {
        struct conf *c = LOAD_OK(text);
        if (c != NULL) {
            CHECK_EQ_INT(strlen(c->pools[0].check_host), 185);
            conf_free(c);
        }
    }

    /* one more would reach the handler in two pieces */
    snprintf(text, sizeof(text), FRONTEND POOL "check_host = %.*s\n",
             199 - 13, pad);
    EXPECT_ERRORS(text, "@:6: line is too long (199 characters, at most "
                  "198)\n");

    /* \r takes a byte of the buffer too */
    snprintf(text, sizeof(text), FRONTEND POOL "check_host = %.*s\r\n",
             198 - 13, pad);
    EXPECT_ERRORS(text, "@:6: line is too long (198 characters, at most "
                  "197)\n");

    /* a lost header: its keys must not land in the section before */
    snprintf(text, sizeof(text), FRONTEND POOL "[pool %.*s]\n"
             "server = web1 127.0.0.1:9002\n", 200, pad);
    EXPECT_ERRORS(text, "@:6: line is too long (207 characters, at most "
                  "198)\n");

    /* a comment as well: its second half would be read as a key */
    snprintf(text, sizeof(text), FRONTEND POOL "; %.*s\nretries = 1\n",
             300, pad);
    EXPECT_ERRORS(text, "@:6: line is too long (302 characters, at most "
                  "198)\n");
}

static void
test_indentation(void)
{
    /* a continuation line in the style inih accepts */
    EXPECT_ERRORS(FRONTEND POOL "  web2 127.0.0.1:9002\n",
                  "@:6: indentation is not allowed (continuation lines are "
                  "not supported; start each line in column 1)\n");
    /* an indented key: reported once, and still read as a key */
    EXPECT_ERRORS(FRONTEND POOL "\tretries = 99\n",
                  "@:6: indentation is not allowed (continuation lines are "
                  "not supported; start each line in column 1)\n"
                  "@:6: retries: 99 is out of range (0..32)\n");
    /* an indented section: one message per line, nothing else */
    EXPECT_ERRORS(FRONTEND
                  "  [pool web]\n"
                  "  server = web1 127.0.0.1:9001\n",
                  "@:4: indentation is not allowed (continuation lines are "
                  "not supported; start each line in column 1)\n"
                  "@:5: indentation is not allowed (continuation lines are "
                  "not supported; start each line in column 1)\n");
}

static void
test_sections(void)
{
    EXPECT_ERRORS(FRONTEND POOL "[backend web]\n",
                  "@:6: unknown section [backend web] (valid headers: "
                  "[global] [health] [admin] [frontend NAME] [pool NAME])\n");
    /* keys under an unknown section are not reported one by one */
    EXPECT_ERRORS(FRONTEND POOL "[globl]\nworkers = 2\nfoo = bar\n",
                  "@:6: unknown section [globl] (valid headers: [global] "
                  "[health] [admin] [frontend NAME] [pool NAME])\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend api]\n",
                  "@:6: frontend api: listen is required\n"
                  "@:6: frontend api: pool is required (or route lines)\n");
    EXPECT_ERRORS(FRONTEND POOL "[pool api]\n",
                  "@:6: pool api has no servers\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend]\nlisten = 1.2.3.4:80\n",
                  "@:6: [frontend] needs a name: [frontend NAME]\n");
    EXPECT_ERRORS(FRONTEND POOL "[pool  ]\n",
                  "@:6: [pool] needs a name: [pool NAME]\n");
    EXPECT_ERRORS("[frontend web!]\nlisten = 127.0.0.1:8080\npool = web\n"
                  POOL,
                  "@:1: frontend name \"web!\" is invalid (use 1 to 63 of "
                  "A-Z a-z 0-9 _ . -)\n");
    EXPECT_ERRORS(FRONTEND "[pool web 2]\nserver = a 127.0.0.1:1\n",
                  "@:3: frontend web: pool \"web\" does not exist\n"
                  "@:4: pool name \"web 2\" is invalid (use 1 to 63 of "
                  "A-Z a-z 0-9 _ . -)\n");
    EXPECT_ERRORS(FRONTEND POOL "[global x]\n",
                  "@:6: [global] takes no name, found \"x\"\n");
    EXPECT_ERRORS("[global]\nworkers = 1\n" FRONTEND POOL
                  "[global]\nworkers = 2\n",
                  "@:8: [global] is already defined at line 1\n"
                  "@:9: workers: already set at line 2\n");
    EXPECT_ERRORS("[admin]\n[health]\n[admin]\n" FRONTEND POOL,
                  "@:3: [admin] is already defined at line 1\n");
    EXPECT_ERRORS(FRONTEND POOL "[pool web\nserver = a 127.0.0.1:1\n",
                  "@:6: section header \"[pool web\" has no closing ]\n");
    EXPECT_ERRORS(FRONTEND POOL "[health] threads = 2\n",
                  "@:6: unexpected text \"threads = 2\" after the section "
                  "header\n");
    /* what a file cut short after its [global] section looks like */
    EXPECT_ERRORS("[global]\nworkers = 2\n",
                  "@: no [frontend NAME] section: lb would listen on nothing\n");
    EXPECT_ERRORS("; a comment\n" POOL,
                  "@: no [frontend NAME] section: lb would listen on nothing\n");
}

static void
test_keys(void)
{
    EXPECT_ERRORS("[global]\nworker = 2\n" FRONTEND POOL,
                  "@:2: unknown key \"worker\" in [global]\n");
    EXPECT_ERRORS(FRONTEND POOL "weight = 2\n",
                  "@:6: unknown key \"weight\" in [pool web]\n");
    EXPECT_ERRORS(FRONTEND "balance = leastconn\n" POOL,
                  "@:4: unknown key \"balance\" in [frontend web]\n");
    EXPECT_ERRORS("workers = 2\n" FRONTEND POOL,
                  "@:1: key \"workers\" is outside any section (put it "
                  "under one of [global] [health] [admin] [frontend NAME] "
                  "[pool NAME])\n");
    EXPECT_ERRORS(FRONTEND POOL "connect_timeout = 1s\nretries = 1\n"
                  "connect_timeout = 2s\n",
                  "@:8: connect_timeout: already set at line 6\n");
    /* a rejected value still counts as set */
    EXPECT_ERRORS(FRONTEND POOL "retries = x\nretries = 1\n",
                  "@:6: retries: \"x\" is not a number\n"
                  "@:7: retries: already set at line 6\n");
    EXPECT_ERRORS(FRONTEND POOL "retries\n",
                  "@:6: expected KEY = VALUE, found \"retries\"\n");
    EXPECT_ERRORS("[frontend web]\nlisten 127.0.0.1:8080\npool = web\n" POOL,
                  "@:1: frontend web: listen is required\n"
                  "@:2: expected KEY = VALUE, found \"listen "
                  "127.0.0.1:8080\"\n");
    EXPECT_ERRORS(FRONTEND POOL "= 5\n", "@:6: missing key name before =\n");
}

static void
test_values(void)
{
    EXPECT_ERRORS(FRONTEND POOL "check_interval = 10q\n",
                  "@:6: check_interval: \"10q\" is not a duration (use ms, "
                  "s, m or h)\n");
    EXPECT_ERRORS(FRONTEND POOL "check_interval = 10\n",
                  "@:6: check_interval: \"10\" needs a unit (ms, s, m or "
                  "h)\n");
    EXPECT_ERRORS("[global]\nmax_connections = 0\n" FRONTEND POOL,
                  "@:2: max_connections: 0 is out of range (1..1000000)\n");
    EXPECT_ERRORS("[global]\nworkers = 257\nshutdown_timeout = 2h\n"
                  "log_level = verbose\n" FRONTEND POOL,
                  "@:2: workers: 257 is out of range (0..256)\n"
                  "@:3: shutdown_timeout: 2h is out of range (0..1h)\n"
                  "@:4: log_level: \"verbose\" is not one of debug, info, "
                  "warn or error\n");
    EXPECT_ERRORS("[health]\nthreads = 0\n" FRONTEND POOL,
                  "@:2: threads: 0 is out of range (1..64)\n");
    EXPECT_ERRORS(FRONTEND POOL
                  "connect_timeout = 0\n"
                  "idle_timeout = 25h\n"
                  "retries = -1\n"
                  "check = icmp\n"
                  "check_path = health\n"
                  "check_host = a b\n"
                  "check_expect = 200-600\n"
                  "check_port = 65536\n"
                  "rise = 0\n"
                  "fall = 101\n"
                  "check_verify = maybe\n"
                  "min_servers = 10001\n"
                  "drain_timeout = 25h\n"
                  "observe_errors = 1001\n"
                  "balance = weighted\n",
                  "@:6: connect_timeout: 0 is out of range (1ms..1h)\n"
                  "@:7: idle_timeout: 25h is out of range (1ms..24h)\n"
                  "@:8: retries: \"-1\" is not a number\n"
                  "@:9: check: \"icmp\" is not one of none, tcp, http, https, "
                  "mysql, pgsql, redis, dns, udp or grpc\n"
                  "@:10: check_path: \"health\" is not a path (it starts "
                  "with / and has no spaces)\n"
                  "@:11: check_host: \"a b\" must not contain spaces\n"
                  "@:12: check_expect: status code 600 is out of range "
                  "(100..599)\n"
                  "@:13: check_port: 65536 is out of range (0..65535)\n"
                  "@:14: rise: 0 is out of range (1..100)\n"
                  "@:15: fall: 101 is out of range (1..100)\n"
                  "@:16: check_verify: \"maybe\" is not on or off (use "
                  "on/off, yes/no, true/false or 1/0)\n"
                  "@:17: min_servers: 10001 is out of range (0..10000 or "
                  "0%..100%)\n"
                  "@:18: drain_timeout: 25h is out of range (0..24h)\n"
                  "@:19: observe_errors: 1001 is out of range (0..1000)\n"
                  "@:20: balance: \"weighted\" is not one of roundrobin, "
                  "leastconn, source or random\n");
    EXPECT_ERRORS(FRONTEND POOL "min_servers = 101%\n",
                  "@:6: min_servers: 101% is out of range (0%..100%)\n");
    EXPECT_ERRORS(FRONTEND POOL "retries =\n",
                  "@:6: retries: empty value (expected a number)\n");
    EXPECT_ERRORS("[admin]\nlisten = 127.0.0.1\n" FRONTEND POOL,
                  "@:2: listen: \"127.0.0.1\" has no port (use HOST:PORT or "
                  "[IPV6]:PORT)\n");
    EXPECT_ERRORS("[frontend web]\nlisten = 127.0.0.1:0\npool = web\n" POOL,
                  "@:2: listen: \"127.0.0.1:0\": port \"0\" is not "
                  "1..65535\n");
    EXPECT_ERRORS("[frontend web]\nlisten = 127.0.0.1:80\npool = a b\n" POOL,
                  "@:3: pool: \"a b\" is not a valid name (use 1 to 63 of "
                  "A-Z a-z 0-9 _ . -)\n");
}

static void
test_servers(void)
{
    EXPECT_ERRORS(FRONTEND "[pool web]\nserver = web1 127.0.0.1\n",
                  "@:5: server: \"web1 127.0.0.1\" has no port (use NAME "
                  "HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])\n");
    EXPECT_ERRORS(FRONTEND POOL "server = web1 127.0.0.1:9002\n",
                  "@:6: server \"web1\" is already defined at line 5 in pool "
                  "web\n");
    /* each duplicate is reported once, against the first */
    EXPECT_ERRORS(FRONTEND POOL "server = web1 127.0.0.1:9002\n"
                  "server = web1 127.0.0.1:9003\n",
                  "@:6: server \"web1\" is already defined at line 5 in pool "
                  "web\n"
                  "@:7: server \"web1\" is already defined at line 5 in pool "
                  "web\n");
    EXPECT_ERRORS(FRONTEND POOL "server = web2 127.0.0.1:9002 weight=0\n"
                  "server = web3 127.0.0.1:9003 weight=257\n"
                  "server = web4 127.0.0.1:9004 backup\n"
                  "server = web/5 127.0.0.1:9005\n",
                  "@:6: server web2: weight 0 is out of range (1..256)\n"
                  "@:7: server web3: weight 257 is out of range (1..256)\n"
                  "@:8: server web4: unknown option \"backup\" (use NAME "
                  "HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])\n"
                  "@:9: server: name \"web/5\" is invalid (use 1 to 63 of "
                  "A-Z a-z 0-9 _ . - : @ [ ])\n");
    /* the rejected server explains the empty pool: no second message */
    EXPECT_ERRORS(FRONTEND "[pool web]\nserver = web1\n",
                  "@:5: server: \"web1\" has no address (use NAME HOST:PORT "
                  "[weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])\n");
    /* the same name in two pools is fine */
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "[pool api]\n"
                                 "server = web1 127.0.0.1:9001\n");
        conf_free(c);
    }
}

/* A frontend's keys go between these: line 4 on, then its pool. */
#define FE_HEAD "[frontend web]\nlisten = 127.0.0.1:8080\npool = web\n"

/* send_proxy: a server line's own, else its pool's, wherever the pool's
 * line is; the API's and DNS's servers take the pool's at once. */
static void
test_send_proxy(void)
{
    struct conf *c, *d;
    char err[256];

    c = LOAD_OK(FRONTEND "[pool web]\n"
                "server = a 127.0.0.1:9001\n"                   /* before the pool's */
                "server = b 127.0.0.1:9002 send_proxy=off\n"
                "server = c 127.0.0.1:9003 send_proxy=v1\n"
                "send_proxy = v2\n"
                "server = e 127.0.0.1:9004\n"                   /* after it */
                "check_send_proxy = on\n"
                "[pool other]\n"
                "server = o1 127.0.0.1:9101 send_proxy=v2\n"
                "server = o2 127.0.0.1:9102\n");
    if (c == NULL)
        return;
    CHECK_EQ_INT(c->pools[0].send_proxy, CONF_PROXY_V2);
    CHECK(c->pools[0].check_send_proxy);
    CHECK_EQ_INT(c->pools[0].servers[0].send_proxy, CONF_PROXY_V2);
    CHECK_EQ_INT(c->pools[0].servers[1].send_proxy, CONF_PROXY_OFF);
    CHECK_EQ_INT(c->pools[0].servers[2].send_proxy, CONF_PROXY_V1);
    CHECK_EQ_INT(c->pools[0].servers[3].send_proxy, CONF_PROXY_V2);
    /* the other pool: its default, off */
    CHECK_EQ_INT(c->pools[1].send_proxy, CONF_PROXY_OFF);
    CHECK(!c->pools[1].check_send_proxy);
    CHECK_EQ_INT(c->pools[1].servers[0].send_proxy, CONF_PROXY_V2);
    CHECK_EQ_INT(c->pools[1].servers[1].send_proxy, CONF_PROXY_OFF);

    /* added later (admin API, DNS): resolved from the pool at once, in a
     * copy as in the original */
    d = conf_dup(c);
    CHECK(d != NULL);
    if (d != NULL) {
        CHECK_EQ_INT(conf_pool_add_server(d, 0, "m1 127.0.0.1:9201", CONF_SOURCE_API, err,
                                          sizeof(err)), 0);
        CHECK_EQ_INT(conf_pool_add_server(d, 0, "m2 127.0.0.1:9202 send_proxy=v1",
                                          CONF_SOURCE_DNS, err, sizeof(err)), 0);
        CHECK_EQ_INT(conf_pool_add_server(d, 1, "m3 127.0.0.1:9203", CONF_SOURCE_API, err,
                                          sizeof(err)), 0);
        CHECK_EQ_INT(d->pools[0].nservers, 6);
        CHECK_EQ_INT(d->pools[0].servers[4].send_proxy, CONF_PROXY_V2);
        CHECK_EQ_INT(d->pools[0].servers[5].send_proxy, CONF_PROXY_V1);
        CHECK_EQ_INT(d->pools[1].servers[2].send_proxy, CONF_PROXY_OFF);
        /* the servers before keep theirs */
        CHECK_EQ_INT(d->pools[0].servers[1].send_proxy, CONF_PROXY_OFF);
        CHECK_EQ_INT(conf_pool_add_server(d, 0, "m4 127.0.0.1:9204 send_proxy=v3",
                                          CONF_SOURCE_API, err, sizeof(err)), -1);
        CHECK_EQ_STR(err, "server m4: send_proxy \"v3\" is not one of off, v1 or v2");
        CHECK_EQ_INT(d->pools[0].nservers, 6);
    }
    conf_free(d);
    conf_free(c);

    CHECK_EQ_STR(conf_proxy_name(CONF_PROXY_OFF), "off");
    CHECK_EQ_STR(conf_proxy_name(CONF_PROXY_V1), "v1");
    CHECK_EQ_STR(conf_proxy_name(CONF_PROXY_V2), "v2");
    CHECK_EQ_STR(conf_proxy_name(CONF_PROXY_ANY), "any");
    CHECK_EQ_STR(conf_proxy_name((enum conf_proxy)4), "unknown");

    EXPECT_ERRORS(FRONTEND POOL "send_proxy = any\n",
                  "@:6: send_proxy: \"any\" is not one of off, v1 or v2\n");
    EXPECT_ERRORS(FRONTEND POOL "send_proxy = on\n",
                  "@:6: send_proxy: \"on\" is not one of off, v1 or v2\n");
    EXPECT_ERRORS(FRONTEND POOL "check_send_proxy = v2\n",
                  "@:6: check_send_proxy: \"v2\" is not on or off (use on/off, yes/no, "
                  "true/false or 1/0)\n");
    EXPECT_ERRORS(FRONTEND POOL "send_proxy = v1\nsend_proxy = v2\n",
                  "@:7: send_proxy: already set at line 6\n");
    EXPECT_ERRORS(FRONTEND POOL "server = b 127.0.0.1:9002 send_proxy=yes\n",
                  "@:6: server b: send_proxy \"yes\" is not one of off, v1 or v2\n");
    EXPECT_ERRORS(FRONTEND POOL "server = b 127.0.0.1:9002 send_proxy=v1 send_proxy=v1\n",
                  "@:6: server b: send_proxy is given twice\n");
}

/* The frontend's PROXY header, access lists and per-source limits. */
static void
test_frontend_access(void)
{
    struct conf *c, *d;
    const struct conf_frontend *fe;

    c = LOAD_OK(FRONTEND POOL);
    if (c != NULL) {
        fe = &c->frontends[0];
        CHECK_EQ_INT(fe->accept_proxy, CONF_PROXY_OFF);
        CHECK_EQ_INT(fe->accept_proxy_from.n, 0);
        CHECK_EQ_INT(fe->accept_proxy_timeout_ms, 3000);
        CHECK_EQ_INT(fe->allow.n, 0);
        CHECK_EQ_INT(fe->deny.n, 0);
        CHECK_EQ_INT(fe->max_connections_per_source, 0);
        CHECK_EQ_INT(fe->rate_per_source, 0);
        CHECK_EQ_INT(fe->source_table_size, 65536);
        CHECK_EQ_INT(fe->source_ipv6_prefix, 64);
        CHECK_EQ_INT(c->pools[0].send_proxy, CONF_PROXY_OFF);
        CHECK_EQ_INT(c->pools[0].servers[0].send_proxy, CONF_PROXY_OFF);
        CHECK(!c->pools[0].check_send_proxy);
    }
    conf_free(c);

    c = LOAD_OK(FE_HEAD
                "accept_proxy = any\n"
                "accept_proxy_from = 10.0.0.0/8, 2001:db8::1\n"
                "accept_proxy_timeout = 250ms\n"
                "allow = 192.0.2.0/24,198.51.100.7,::ffff:203.0.113.0/120\n"
                "deny = 192.0.2.128/25\n"
                "max_connections_per_source = 10\n"
                "rate_per_source = 50/s\n"
                "source_table_size = 16777216\n"
                "source_ipv6_prefix = 128\n"
                "[frontend empty]\nlisten = 127.0.0.1:8081\npool = web\n"
                "accept_proxy = off\naccept_proxy_from =\nallow =\ndeny =\n"
                "rate_per_source = 1000000/s\nsource_table_size = 1\n"
                "source_ipv6_prefix = 1\nmax_connections_per_source = 1000000\n"
                "[frontend v1]\nlisten = 127.0.0.1:8082\npool = web\n"
                "accept_proxy = v1\naccept_proxy_from = 127.0.0.1\n"
                "[frontend v2]\nlisten = 127.0.0.1:8083\npool = web\n"
                "accept_proxy = v2\naccept_proxy_from = ::1\n"
                POOL);
    if (c != NULL) {
        static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
        static const uint8_t mapped[4] = { 203, 0, 113, 0 };

        fe = &c->frontends[0];
        CHECK_EQ_INT(fe->accept_proxy, CONF_PROXY_ANY);
        CHECK_EQ_INT(fe->accept_proxy_from.n, 2);
        CHECK_EQ_INT(fe->accept_proxy_from.v[0].family, AF_INET);
        CHECK_EQ_INT(fe->accept_proxy_from.v[0].prefix, 8);
        CHECK_EQ_INT(fe->accept_proxy_from.v[0].addr[0], 10);
        CHECK_EQ_INT(fe->accept_proxy_from.v[1].family, AF_INET6);
        CHECK_EQ_INT(fe->accept_proxy_from.v[1].prefix, 128);
        CHECK(memcmp(fe->accept_proxy_from.v[1].addr, v6, 16) == 0);
        CHECK_EQ_INT(fe->accept_proxy_timeout_ms, 250);
        CHECK_EQ_INT(fe->allow.n, 3);
        CHECK_EQ_INT(fe->allow.v[1].prefix, 32);
        CHECK_EQ_INT(fe->allow.v[1].addr[3], 7);
        CHECK_EQ_INT(fe->allow.v[2].family, AF_INET);       /* mapped: its IPv4 */
        CHECK_EQ_INT(fe->allow.v[2].prefix, 24);
        CHECK(memcmp(fe->allow.v[2].addr, mapped, 4) == 0);
        CHECK_EQ_INT(fe->deny.n, 1);
        CHECK_EQ_INT(fe->deny.v[0].prefix, 25);
        CHECK_EQ_INT(fe->deny.v[0].addr[3], 128);
        CHECK_EQ_INT(fe->max_connections_per_source, 10);
        CHECK_EQ_INT(fe->rate_per_source, 50);
        CHECK_EQ_INT(fe->source_table_size, 16777216);
        CHECK_EQ_INT(fe->source_ipv6_prefix, 128);
        fe = &c->frontends[1];
        CHECK_EQ_INT(fe->accept_proxy, CONF_PROXY_OFF);
        CHECK_EQ_INT(fe->accept_proxy_from.n, 0);
        CHECK_EQ_INT(fe->allow.n, 0);
        CHECK_EQ_INT(fe->deny.n, 0);
        CHECK_EQ_INT(fe->rate_per_source, 1000000);
        CHECK_EQ_INT(fe->source_table_size, 1);
        CHECK_EQ_INT(fe->source_ipv6_prefix, 1);
        CHECK_EQ_INT(fe->max_connections_per_source, 1000000);
        CHECK_EQ_INT(c->frontends[2].accept_proxy, CONF_PROXY_V1);
        CHECK_EQ_INT(c->frontends[3].accept_proxy, CONF_PROXY_V2);
        CHECK_EQ_INT(c->frontends[3].accept_proxy_from.v[0].family, AF_INET6);

        /* a copy holds the lists by value */
        d = conf_dup(c);
        CHECK(d != NULL);
        if (d != NULL) {
            CHECK(memcmp(&d->frontends[0].allow, &c->frontends[0].allow,
                         sizeof(struct conf_cidrs)) == 0);
            CHECK(memcmp(&d->frontends[0].accept_proxy_from, &c->frontends[0].accept_proxy_from,
                         sizeof(struct conf_cidrs)) == 0);
            CHECK(d->frontends != c->frontends);
            CHECK_EQ_INT(d->frontends[0].rate_per_source, 50);
            CHECK_EQ_INT(d->frontends[0].accept_proxy, CONF_PROXY_ANY);
        }
        conf_free(d);
    }
    conf_free(c);

    /* accept_proxy and accept_proxy_from go together, each error at the
     * key that is there */
    EXPECT_ERRORS(FE_HEAD "accept_proxy = v2\n" POOL,
                  "@:4: accept_proxy = v2 needs accept_proxy_from: the addresses of the "
                  "balancers allowed to send a PROXY header\n");
    EXPECT_ERRORS(FE_HEAD "accept_proxy = any\naccept_proxy_from =\n" POOL,
                  "@:4: accept_proxy = any needs accept_proxy_from: the addresses of the "
                  "balancers allowed to send a PROXY header\n");
    EXPECT_ERRORS(FE_HEAD "accept_proxy_from = 10.0.0.0/8\n" POOL,
                  "@:4: accept_proxy_from needs accept_proxy = v1, v2 or any (with "
                  "accept_proxy off, no PROXY header is read)\n");
    EXPECT_ERRORS(FE_HEAD "accept_proxy_from = 10.0.0.0/8\naccept_proxy = off\n" POOL,
                  "@:4: accept_proxy_from needs accept_proxy = v1, v2 or any (with "
                  "accept_proxy off, no PROXY header is read)\n");
    /* a rejected value of either is its only message */
    EXPECT_ERRORS(FE_HEAD "accept_proxy = v3\naccept_proxy_from = 10.0.0.0/8\n" POOL,
                  "@:4: accept_proxy: \"v3\" is not one of off, v1, v2 or any\n");
    EXPECT_ERRORS(FE_HEAD "accept_proxy = v1\naccept_proxy_from = 10.0.0.1/8\n" POOL,
                  "@:5: accept_proxy_from: \"10.0.0.1/8\" has bits set past its /8: did "
                  "you mean 10.0.0.0/8?\n");

    EXPECT_ERRORS(FE_HEAD
                  "allow = 10.1.2.3/8\n"
                  "deny = 10.0.0.0/8,,192.0.2.7\n"
                  "accept_proxy_timeout = 0\n"
                  "max_connections_per_source = 1000001\n"
                  "rate_per_source = 10\n"
                  "source_table_size = 0\n"
                  "source_ipv6_prefix = 129\n"
                  POOL,
                  "@:4: allow: \"10.1.2.3/8\" has bits set past its /8: did you mean "
                  "10.0.0.0/8?\n"
                  "@:5: deny: \"10.0.0.0/8,,192.0.2.7\" has an empty item (expected "
                  "addresses or ADDR/PREFIX blocks, e.g. 10.0.0.0/8, 2001:db8::/32, "
                  "192.0.2.7)\n"
                  "@:6: accept_proxy_timeout: 0 is out of range (1ms..1h)\n"
                  "@:7: max_connections_per_source: 1000001 is out of range (0..1000000)\n"
                  "@:8: rate_per_source: \"10\" needs its unit: write N/s, e.g. 10/s (new "
                  "connections per second)\n"
                  "@:9: source_table_size: 0 is out of range (1..16777216)\n"
                  "@:10: source_ipv6_prefix: 129 is out of range (1..128)\n");
    EXPECT_ERRORS(FE_HEAD
                  "allow = lb.example.com\n"
                  "deny = 2001:db8::/129\n"
                  "accept_proxy_timeout = 2h\n"
                  "rate_per_source = 10/m\n"
                  "source_table_size = 16777217\n"
                  "source_ipv6_prefix = 0\n"
                  POOL,
                  "@:4: allow: \"lb.example.com\" is not an IPv4 or IPv6 address (write "
                  "ADDR or ADDR/PREFIX, e.g. 192.0.2.7 or 10.0.0.0/8; names are not "
                  "looked up)\n"
                  "@:5: deny: \"2001:db8::/129\": the prefix after / is not 0..128\n"
                  "@:6: accept_proxy_timeout: 2h is out of range (1ms..1h)\n"
                  "@:7: rate_per_source: \"10/m\": the rate is per second (write N/s, "
                  "e.g. 100/s)\n"
                  "@:8: source_table_size: 16777217 is out of range (1..16777216)\n"
                  "@:9: source_ipv6_prefix: 0 is out of range (1..128)\n");
    EXPECT_ERRORS(FE_HEAD "rate_per_source = 1000001/s\nallow = 10.0.0.0/8\n"
                  "allow = 10.0.0.0/8\n" POOL,
                  "@:4: rate_per_source: 1000001/s is out of range (0/s..1000000/s)\n"
                  "@:6: allow: already set at line 5\n");
    EXPECT_ERRORS(FE_HEAD "rate_per_source =\n" POOL,
                  "@:4: rate_per_source: empty value (expected a rate N/s, e.g. 100/s; "
                  "0/s for no limit)\n");
    /* frontend keys in a pool, pool keys in a frontend */
    EXPECT_ERRORS(FRONTEND POOL "allow = 10.0.0.0/8\n",
                  "@:6: unknown key \"allow\" in [pool web]\n");
    EXPECT_ERRORS(FE_HEAD "send_proxy = v2\n" POOL,
                  "@:4: unknown key \"send_proxy\" in [frontend web]\n");
    /* More than CONF_CIDRS_MAX blocks cannot be written: a line holds at
     * most 198 characters (conf_value_test covers the parser's limit). */
}

/* The message of getaddrinfo may vary with the libc: check the rest. */
static void
test_unresolvable(void)
{
    struct conf *c = NULL;
    char *errors = NULL, *want;
    const char *rest;

    const char *text = FRONTEND "[pool web]\nserver = web1 nohost.invalid:80\n"
                       "[frontend api]\nlisten = nohost.invalid:81\n"
                       "pool = web\n";

    write_file(text, strlen(text));
    CHECK_EQ_INT(conf_load(path, &c, &errors), -1);
    CHECK(c == NULL);
    if (errors == NULL)
        return;
    want = expand("@:5: server web1: address \"nohost.invalid:80\" does not "
                  "resolve (");
    CHECK(strncmp(errors, want, strlen(want)) == 0);
    free(want);
    rest = strchr(errors, '\n');
    want = expand("@:7: listen: address \"nohost.invalid:81\" does not "
                  "resolve (");
    CHECK(rest != NULL && strncmp(rest + 1, want, strlen(want)) == 0);
    /* two lines and nothing more */
    CHECK(rest != NULL && strchr(rest + 1, '\n') != NULL &&
          strchr(rest + 1, '\n')[1] == '\0');
    free(want);
    free(errors);
}

static void
test_references(void)
{
    EXPECT_ERRORS("[frontend web]\nlisten = 127.0.0.1:8080\npool = api\n"
                  POOL,
                  "@:3: frontend web: pool \"api\" does not exist\n");
    EXPECT_ERRORS(FRONTEND POOL "[pool web]\nserver = a 127.0.0.1:1\n",
                  "@:6: pool \"web\" is already defined at line 4\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend web]\nlisten = 127.0.0.1:8081\n"
                  "pool = web\n",
                  "@:6: frontend \"web\" is already defined at line 1\n");
    /* pools and frontends as servers: each duplicate once, against the
     * first, whatever the order of the names in between */
    EXPECT_ERRORS(FRONTEND POOL "[pool b]\nserver = b 127.0.0.1:2\n"
                  "[pool web]\nserver = c 127.0.0.1:3\n"
                  "[pool a]\nserver = d 127.0.0.1:4\n"
                  "[pool web]\nserver = e 127.0.0.1:5\n",
                  "@:8: pool \"web\" is already defined at line 4\n"
                  "@:12: pool \"web\" is already defined at line 4\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend web]\nlisten = 127.0.0.1:8081\npool = web\n"
                  "[frontend web]\nlisten = 127.0.0.1:8082\npool = web\n",
                  "@:6: frontend \"web\" is already defined at line 1\n"
                  "@:9: frontend \"web\" is already defined at line 1\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend api]\nlisten = 127.0.0.1:8080\n"
                  "pool = web\n",
                  "@:7: frontend api: listen 127.0.0.1:8080 is already used "
                  "by frontend web at line 2\n");
    EXPECT_ERRORS(FRONTEND POOL "[frontend api]\nlisten = *:8080\n"
                  "pool = web\n",
                  "@:7: frontend api: listen *:8080 overlaps listen "
                  "127.0.0.1:8080 of frontend web at line 2\n");
    EXPECT_ERRORS("[frontend web]\nlisten = 127.0.0.1:9900\npool = web\n"
                  POOL,
                  "@:2: frontend web: listen 127.0.0.1:9900 overlaps the "
                  "[admin] listen 127.0.0.1:9900 (its default)\n");
    EXPECT_ERRORS("[admin]\nlisten = *:8080\n" FRONTEND POOL,
                  "@:4: frontend web: listen 127.0.0.1:8080 overlaps the "
                  "[admin] listen *:8080 at line 2\n");
    /* a bad listen is not also reported as missing or conflicting */
    EXPECT_ERRORS(FRONTEND POOL "[frontend api]\nlisten = 127.0.0.1:x\n"
                  "pool = web\n",
                  "@:7: listen: \"127.0.0.1:x\": port \"x\" is not "
                  "1..65535\n");
    /* different ports, or the same port on two addresses, are fine */
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "[frontend api]\n"
                                 "listen = 127.0.0.2:8080\npool = web\n"
                                 "[frontend v6]\nlisten = [::1]:8080\n"
                                 "pool = web\n");
        if (c != NULL)
            CHECK_EQ_INT(c->nfrontends, 3);
        conf_free(c);
    }
}

static void
test_check_timeout(void)
{
    EXPECT_ERRORS(FRONTEND POOL "check_interval = 2s\ncheck_timeout = 3s\n",
                  "@:7: pool web: check_timeout 3s is longer than "
                  "check_interval 2s\n");
    /* an explicit timeout longer than a short interval stays an error,
     * in either order */
    EXPECT_ERRORS(FRONTEND POOL "check_timeout = 1s\ncheck_interval = 200ms\n",
                  "@:6: pool web: check_timeout 1s is longer than "
                  "check_interval 200ms\n");
    /* equal is fine */
    conf_free(LOAD_OK(FRONTEND POOL "check_interval = 1s\n"));

    /* Unset, the timeout follows a shorter interval, as HAProxy's "timeout
     * check" does ("inter" is then the whole check's timeout), and is its
     * 1s default otherwise. */
    static const struct { const char *interval; uint64_t timeout_ms; } follows[] = {
        { "200ms", 200 }, { "1ms", 1 }, { "999ms", 999 }, { "1s", 1000 },
        { "1001ms", 1000 }, { "2s", 1000 }, { "1h", 1000 },
    };
    for (size_t i = 0; i < sizeof(follows) / sizeof(follows[0]); i++) {
        char text[256];
        struct conf *c;

        snprintf(text, sizeof(text), FRONTEND POOL "check_interval = %s\n",
                 follows[i].interval);
        c = LOAD_OK(text);
        if (c != NULL)
            CHECK_EQ_INT(c->pools[0].check_timeout_ms, follows[i].timeout_ms);
        conf_free(c);
    }
    /* an explicit timeout is kept, even one shorter than the default */
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "check_interval = 200ms\n"
                                 "check_timeout = 50ms\n");
        if (c != NULL)
            CHECK_EQ_INT(c->pools[0].check_timeout_ms, 50);
        conf_free(c);
    }
    /* per pool: a second pool's interval does not shorten the first's */
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "[pool api]\nserver = a1 127.0.0.1:9002\n"
                                 "check_interval = 300ms\n");
        if (c != NULL) {
            CHECK_EQ_INT(c->pools[0].check_timeout_ms, 1000);
            CHECK_EQ_INT(c->pools[1].check_timeout_ms, 300);
        }
        conf_free(c);
    }
    /* the copy a reload or the admin API makes keeps the merged value */
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "check_interval = 200ms\n");
        struct conf *d = c != NULL ? conf_dup(c) : NULL;

        if (d != NULL)
            CHECK_EQ_INT(d->pools[0].check_timeout_ms, 200);
        conf_free(d);
        conf_free(c);
    }
    /* a rejected interval is not compared */
    EXPECT_ERRORS(FRONTEND POOL "check_interval = 0\ncheck_timeout = 3s\n",
                  "@:6: check_interval: 0 is out of range (1ms..1h)\n");
}

static void
test_agent_keys(void)
{
    /* Unset, the agent's interval is the check's, its timeout the check's
     * capped at that interval; written, they are kept. */
    static const struct {
        const char *keys;
        uint64_t interval_ms, timeout_ms;
    } cases[] = {
        { "", 2000, 1000 },
        { "check_interval = 300ms\n", 300, 300 },
        { "agent_interval = 500ms\n", 500, 500 },
        { "agent_interval = 5s\n", 5000, 1000 },
        { "agent_interval = 5s\nagent_timeout = 4s\n", 5000, 4000 },
        { "check_timeout = 100ms\nagent_interval = 1s\n", 1000, 100 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        struct conf *c;

        snprintf(text, sizeof(text), FRONTEND "[pool web]\nserver = web1 127.0.0.1:9001 "
                 "agent_port=9101\n%s", cases[i].keys);
        c = LOAD_OK(text);
        if (c != NULL) {
            CHECK_EQ_INT(c->pools[0].servers[0].agent_port, 9101);
            CHECK_EQ_INT(c->pools[0].agent_interval_ms, cases[i].interval_ms);
            CHECK_EQ_INT(c->pools[0].agent_timeout_ms, cases[i].timeout_ms);
        }
        conf_free(c);
    }
    {
        struct conf *c = LOAD_OK(FRONTEND POOL "agent_send = hello\\n\n");

        if (c != NULL) {
            CHECK_EQ_INT(c->pools[0].servers[0].agent_port, 0);
            CHECK_EQ_INT(c->pools[0].agent_send.len, 6);
            CHECK(memcmp(c->pools[0].agent_send.v, "hello\n", 6) == 0);
        }
        conf_free(c);
    }
    EXPECT_ERRORS(FRONTEND POOL "agent_interval = 1s\nagent_timeout = 2s\n",
                  "@:7: pool web: agent_timeout 2s is longer than agent_interval 1s\n");
    EXPECT_ERRORS(FRONTEND "[pool web]\nserver = web1 127.0.0.1:9001 agent_port=70000\n",
                  "@:5: server web1: agent_port 70000 is out of range (1..65535)\n");
    EXPECT_ERRORS(FRONTEND "[pool web]\nserver = web1 127.0.0.1:9001 agent_port=x\n",
                  "@:5: server web1: agent_port \"x\" is not a number\n");
}

static void
test_control_socket(void)
{
    EXPECT_ERRORS("[global]\ncontrol_socket = run/lb.sock\n" FRONTEND POOL,
                  "@:2: control_socket: \"run/lb.sock\" is not a path (it starts with / "
                  "and has no spaces)\n");
    {
        char text[400], exp[200];

        snprintf(text, sizeof(text), "[global]\ncontrol_socket = /%0107d\n" FRONTEND POOL, 0);
        snprintf(exp, sizeof(exp), "@:2: control_socket: 108 bytes, at most 107 (a UNIX "
                 "socket's path)\n");
        EXPECT_ERRORS(text, exp);
    }
    struct conf *c = LOAD_OK("[global]\ncontrol_socket = /run/lb/lb.sock\n" FRONTEND POOL);

    if (c != NULL)
        CHECK_EQ_STR(c->global.control_socket, "/run/lb/lb.sock");
    conf_free(c);
}

/* A copy takes servers one by one as the original did (the admin API's
 * members join a copy of the file's config): for every count, whatever
 * capacity conf_set_server expects. ASan sees an overflow. */
static void
test_dup_then_add(void)
{
    for (int n = 1; n <= 5; n++) {
        char text[600], line[64], err[128];
        size_t at = (size_t)snprintf(text, sizeof(text), FRONTEND "[pool web]\n");

        for (int i = 0; i < n; i++)
            at += (size_t)snprintf(text + at, sizeof(text) - at,
                                   "server = s%d 127.0.0.1:%d\n", i, 9000 + i);
        struct conf *c = LOAD_OK(text);
        struct conf *d = c != NULL ? conf_dup(c) : NULL;

        CHECK(d != NULL);
        for (int i = 0; d != NULL && i < 9; i++) {
            snprintf(line, sizeof(line), "m%d 127.0.0.1:%d", i, 9100 + i);
            CHECK_EQ_INT(conf_pool_add_server(d, 0, line, CONF_SOURCE_API, err, sizeof(err)), 0);
        }
        if (d != NULL)
            CHECK_EQ_INT(d->pools[0].nservers, n + 9);
        conf_free(d);
        conf_free(c);
    }
}

/* lb(8) documents every key of the key table (and so every key a new
 * table entry adds), each as a ".B key" line under its section. */
static void
test_man_page_lists_every_key(void)
{
    static const char *const sections[CONF_SECTION_KINDS] = {
        [CONF_SECTION_GLOBAL] = ".SS [global]", [CONF_SECTION_HEALTH] = ".SS [health]",
        [CONF_SECTION_ADMIN] = ".SS [admin]", [CONF_SECTION_FRONTEND] = ".SS [frontend NAME]",
        [CONF_SECTION_POOL] = ".SS [pool NAME]",
    };
    FILE *f = fopen("deploy/lb.8", "r");
    char *text = calloc(1, 1 << 16);
    size_t n = f != NULL && text != NULL ? fread(text, 1, (1 << 16) - 1, f) : 0;

    CHECK(n > 0);
    for (int kind = 0; n > 0 && kind < CONF_SECTION_KINDS; kind++) {
        const char *at = strstr(text, sections[kind]), *end;
        size_t nkeys;
        const struct conf_key *keys = conf_keys_of(kind, &nkeys);

        CHECK(at != NULL);
        if (at == NULL)
            continue;
        end = strstr(at + 1, "\n.S");      /* the next section or heading */
        for (size_t i = 0; i < nkeys; i++) {
            char line[80];
            const char *hit;

            snprintf(line, sizeof(line), "\n.B %s\n", keys[i].name);
            hit = strstr(at, line);
            if (hit == NULL || (end != NULL && hit > end)) {
                fprintf(stderr, "lb.8: %s lacks \".B %s\"\n", sections[kind], keys[i].name);
                CHECK(false);
            }
        }
    }
    if (f != NULL)
        fclose(f);
    free(text);
}

static void
test_file(void)
{
    struct conf *c = (struct conf *)1;
    char *errors = NULL, want[320];

    EXPECT_ERRORS("", "@:1: file is empty (expected sections such as "
                  "[frontend NAME] and [pool NAME])\n");
    EXPECT_ERRORS("; only\n\n# comments\n   \n",
                  "@:1: file is empty (expected sections such as "
                  "[frontend NAME] and [pool NAME])\n");
    expect_errors_n(__LINE__, FRONTEND "[pool w\0b]\n", strlen(FRONTEND) + 11,
                    "@:4: binary data (byte 0x00 at column 8)\n");
    EXPECT_ERRORS(FRONTEND POOL "retries = 2\xff\n",
                  "@:6: binary data (byte 0xff at column 12)\n");
    EXPECT_ERRORS("\x7f" "ELF\x02\x01\x01", "@:1: binary data (byte 0x7f at "
                  "column 1)\n");

    /* from memory, the name given is the file in every message */
    CHECK_EQ_INT(conf_load_text("mem.ini", NULL, 0, &c, &errors), -1);
    CHECK(c == NULL);
    CHECK_EQ_STR(errors, "mem.ini:1: file is empty (expected sections such "
                 "as [frontend NAME] and [pool NAME])\n");
    free(errors);

    c = (struct conf *)1;
    CHECK_EQ_INT(conf_load("/nonexistent/lb.ini", &c, &errors), -1);
    CHECK(c == NULL);
    CHECK_EQ_STR(errors, "/nonexistent/lb.ini: cannot open: No such file or "
                 "directory\n");
    free(errors);

    c = (struct conf *)1;
    CHECK_EQ_INT(conf_load(dir, &c, &errors), -1);
    CHECK(c == NULL);
    snprintf(want, sizeof(want), "%s: cannot read: Is a directory\n", dir);
    CHECK_EQ_STR(errors, want);
    free(errors);

    /* a device or a FIFO is refused before it is read: an endless one
     * would eat memory, a FIFO without a writer would block a reload */
    c = (struct conf *)1;
    CHECK_EQ_INT(conf_load("/dev/zero", &c, &errors), -1);
    CHECK(c == NULL);
    CHECK_EQ_STR(errors, "/dev/zero: cannot read: not a regular file\n");
    free(errors);
    char fifo[256];

    snprintf(fifo, sizeof(fifo), "%s/fifo.ini", dir);
    if (mkfifo(fifo, 0600) == 0) {
        CHECK_EQ_INT(conf_load(fifo, &c, &errors), -1);
        snprintf(want, sizeof(want), "%s: cannot read: not a regular file\n", fifo);
        CHECK_EQ_STR(errors, want);
        free(errors);
        unlink(fifo);
    } else {
        CHECK(!"mkfifo failed");
    }

    conf_free(NULL);
}

/* ------------------------------------------------- a file being written */

/* A config whose pool has n servers named PREFIX1..PREFIXn: a prefix of it
 * that parses has fewer, or none of them. */
static void
servers_text(char *buf, size_t len, const char *prefix, int n)
{
    size_t t = (size_t)snprintf(buf, len, "%s[pool web]\n", FRONTEND);

    for (int i = 1; i <= n; i++)
        t += (size_t)snprintf(buf + t, len - t, "server = %s%d 127.0.0.1:%d\n",
                              prefix, i, 9000 + i);
}

/* Rewrites path in place, as `cat > file` does: truncate, then chunk bytes
 * per write(2) with pause_us between writes; rounds times, or until stop
 * (rounds 0). */
struct writer {
    const char *text;
    size_t chunk;
    unsigned pause_us;
    int rounds;
    atomic_bool stop;
    atomic_int writes;                  /* write(2) calls made */
    atomic_int done;                    /* rounds written */
};

static void *
writer_run(void *arg)
{
    struct writer *w = arg;
    size_t n = strlen(w->text);

    for (int r = 0; w->rounds == 0 ? !atomic_load(&w->stop) : r < w->rounds; r++) {
        int fd = open(path, O_WRONLY | O_TRUNC);

        if (fd < 0) {
            perror(path);
            exit(2);
        }
        for (size_t off = 0; off < n; off += w->chunk) {
            size_t k = n - off < w->chunk ? n - off : w->chunk;

            if (write(fd, w->text + off, k) != (ssize_t)k) {
                perror("write");
                exit(2);
            }
            atomic_fetch_add(&w->writes, 1);
            if (w->pause_us)
                usleep(w->pause_us);
        }
        close(fd);
        atomic_fetch_add(&w->done, 1);
    }
    return NULL;
}

static double
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether c is exactly the config of servers_text(prefix, n). */
static bool
is_version(const struct conf *c, const char *prefix, int n)
{
    char name[32];

    if (c == NULL || c->npools != 1 || c->pools[0].nservers != (size_t)n)
        return false;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s%d", prefix, i + 1);
        if (strcmp(c->pools[0].servers[i].name, name) != 0)
            return false;
    }
    return true;
}

/* conf_load throws away a read that a write overlapped, and says so once
 * a writer keeps overlapping: with a writer rewriting the file without a
 * pause, some loads must end in that error (bounded at 2 s). The loads it
 * accepts may still be a prefix: a read that fell between two writes sees
 * one version, which is what conf_load_settled is for. */
static void
test_changed_while_read(void)
{
    static char text[8192];
    struct writer w = { .text = text, .chunk = 16 };
    int changed = 0, full = 0, prefix = 0, other = 0;
    double t0 = mono_ms();
    pthread_t t;

    servers_text(text, sizeof(text), "s", 100);
    write_file(text, strlen(text));
    CHECK(pthread_create(&t, NULL, writer_run, &w) == 0);
    while (changed == 0 && mono_ms() - t0 < 2000) {
        struct conf *c = NULL;
        char *errors = NULL;

        if (conf_load(path, &c, &errors) == 0)
            *(is_version(c, "s", 100) ? &full : &prefix) += 1;
        else if (strstr(errors, "the file changed while it was read (3 reads): write "
                        "the new version elsewhere and rename it into place") != NULL)
            changed++;
        else
            other++;                    /* "file is empty", after a truncate */
        conf_free(c);
        free(errors);
    }
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    fprintf(stderr, "changed while read: %d refused, %d whole, %d prefix, %d other "
            "errors in %.0f ms, %d rewrites\n", changed, full, prefix, other,
            mono_ms() - t0, atomic_load(&w.done));
    CHECK(changed > 0);
}

/* What a reload does with conf_load_settled (reload.c, on a timer): try
 * again when told, up to max_ms in all; past that, its error. */
static int
load_quiet(const char *file, unsigned quiet_ms, unsigned max_ms, struct conf **c,
           char **errors)
{
    double t0 = mono_ms();

    for (;;) {
        uint64_t retry_ms;
        int rc = conf_load_settled(file, quiet_ms, c, errors, &retry_ms);

        if (rc != 1 || mono_ms() - t0 + (double)retry_ms > max_ms)
            return rc == 1 ? -1 : rc;
        free(*errors);
        usleep((useconds_t)retry_ms * 1000);
    }
}

/* conf_load_settled loads a file unchanged for quiet_ms, and says how long
 * to wait for one that is fresher. */
static void
test_load_quiet_waits(void)
{
    static char text[8192];
    struct timespec times[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
    struct conf *c = NULL;
    char *errors = NULL;
    double t0, ms;

    servers_text(text, sizeof(text), "s", 3);
    write_file(text, strlen(text));     /* just written: fresh */
    t0 = mono_ms();
    CHECK_EQ_INT(load_quiet(path, 300, 1000, &c, &errors), 0);
    ms = mono_ms() - t0;
    /* the file's clock ticks coarsely (a few ms): 300 ms less one tick */
    CHECK(ms >= 250);
    CHECK(is_version(c, "s", 3));
    conf_free(c);

    /* written 10 s ago, or an hour ahead (a clock set back): at once */
    for (int ahead = 0; ahead < 2; ahead++) {
        times[1].tv_sec = time(NULL) + (ahead ? 3600 : -10);
        CHECK(utimensat(AT_FDCWD, path, times, 0) == 0);
        t0 = mono_ms();
        CHECK_EQ_INT(load_quiet(path, 300, 1000, &c, &errors), 0);
        ms = mono_ms() - t0;
        CHECK(ms < 150);
        CHECK(is_version(c, "s", 3));
        conf_free(c);
    }
    free(errors);
}

/* A file rewritten slowly in place: a settled load takes the old version
 * or the whole new one, never a part; a writer that never stops is
 * refused once the budget is slept. */
static void
test_load_quiet_writer(void)
{
    static char old[8192], text[8192];
    struct writer w = { .text = text, .chunk = 24, .pause_us = 1000, .rounds = 1 };
    struct conf *c = NULL;
    char *errors = NULL;
    pthread_t t;
    double t0, ms;

    servers_text(old, sizeof(old), "old", 3);
    servers_text(text, sizeof(text), "new", 30);
    for (int round = 0; round < 5; round++) {
        write_file(old, strlen(old));
        atomic_store(&w.writes, 0);
        CHECK(pthread_create(&t, NULL, writer_run, &w) == 0);
        /* caught at different points of the write (its 40-odd calls) */
        while (atomic_load(&w.writes) < round * 8)
            usleep(100);
        CHECK_EQ_INT(load_quiet(path, 100, 3000, &c, &errors), 0);
        CHECK(is_version(c, "old", 3) || is_version(c, "new", 30));
        if (round > 0)                  /* it began before the load */
            CHECK(is_version(c, "new", 30));
        conf_free(c);
        pthread_join(t, NULL);
    }

    w.rounds = 0;
    atomic_store(&w.writes, 0);
    CHECK(pthread_create(&t, NULL, writer_run, &w) == 0);
    while (atomic_load(&w.writes) == 0)
        usleep(100);
    t0 = mono_ms();
    CHECK_EQ_INT(load_quiet(path, 100, 400, &c, &errors), -1);
    ms = mono_ms() - t0;
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    CHECK(c == NULL);
    /* gives up before 400 ms would pass (less one 100 ms wait at the
     * least); twice the bound allows the last load and a busy machine */
    CHECK(ms >= 300 && ms < 800);
    char *want = expand("@: the file is still being written (it changed less than "
                        "100 ms before the last read): write the new version "
                        "elsewhere and rename it into place\n");
    CHECK_EQ_STR(errors, want);
    free(want);
    free(errors);
}

/* Everything wrong in a file is reported in one pass, in line order. */
static void
test_many_errors(void)
{
    char text[8192], exp[16384];
    size_t t = 0, e = 0;
    int i;

    EXPECT_ERRORS("[global]\n"
                  "worker = 2\n"
                  "log_level = loud\n"
                  "[frontend web]\n"
                  "listen = 127.0.0.1:8080\n"
                  "pool = api\n"
                  "[pool web]\n"
                  "  server = web1 127.0.0.1:9001\n"
                  "check_interval = 10q\n"
                  "[backend x]\n",
                  "@:2: unknown key \"worker\" in [global]\n"
                  "@:3: log_level: \"loud\" is not one of debug, info, warn "
                  "or error\n"
                  "@:6: frontend web: pool \"api\" does not exist\n"
                  "@:8: indentation is not allowed (continuation lines are "
                  "not supported; start each line in column 1)\n"
                  "@:9: check_interval: \"10q\" is not a duration (use ms, s, "
                  "m or h)\n"
                  "@:10: unknown section [backend x] (valid headers: "
                  "[global] [health] [admin] [frontend NAME] [pool NAME])\n");

    /* past 100 errors, the rest are counted */
    t += (size_t)snprintf(text + t, sizeof(text) - t, "%s", FRONTEND POOL);
    for (i = 0; i < 130; i++) {
        t += (size_t)snprintf(text + t, sizeof(text) - t, "bad%d = 1\n", i);
        if (i < 100)
            e += (size_t)snprintf(exp + e, sizeof(exp) - e,
                                  "@:%d: unknown key \"bad%d\" in [pool "
                                  "web]\n", i + 6, i);
    }
    snprintf(exp + e, sizeof(exp) - e, "@: 30 more problems not shown\n");
    EXPECT_ERRORS(text, exp);
}


#define ROUTED "[frontend tls]\nlisten = 127.0.0.1:8443\n"
#define POOLS "[pool api]\nserver = a 127.0.0.1:9001\n[pool shop]\nserver = s 127.0.0.1:9002\n" \
              "[pool web]\nserver = w 127.0.0.1:9003\n"

/* route = PATTERN POOL: the patterns as kept, their match whatever the
 * order of the lines, and each mistake at its line. */
static void
test_routes(void)
{
    struct conf *c, *d;
    const struct conf_frontend *fe;

    c = LOAD_OK(ROUTED
                "route = *.Shop.Example.com. shop\n"
                "route = API.example.COM api\n"
                "route = * web\n"
                "route = *.example.com\tweb\n"
                "default_pool = web\n"
                "route_unknown = close\n"
                "sni_max_bytes = 256\n"
                "sni_timeout = 300ms\n" POOLS);
    if (c != NULL) {
        fe = &c->frontends[0];
        CHECK(fe->pool_name == NULL);
        CHECK_EQ_INT(fe->routes.n, 4);
        /* sorted by pattern */
        CHECK_EQ_STR(fe->routes.v[0].pattern, "*");
        CHECK_EQ_STR(fe->routes.v[1].pattern, "*.example.com");
        CHECK_EQ_STR(fe->routes.v[2].pattern, "*.shop.example.com");
        CHECK_EQ_STR(fe->routes.v[3].pattern, "api.example.com");
        CHECK_EQ_INT(fe->routes.v[2].line, 3);
        CHECK_EQ_STR(c->pools[fe->routes.v[2].pool_index].name, "shop");
        CHECK_EQ_STR(c->pools[fe->routes.v[3].pool_index].name, "api");
        CHECK_EQ_STR(c->pools[fe->default_pool_index].name, "web");
        CHECK_EQ_INT(fe->route_unknown, CONF_ROUTE_UNKNOWN_CLOSE);
        CHECK_EQ_INT(fe->sni_max_bytes, 256);
        CHECK_EQ_INT(fe->sni_timeout_ms, 300);
        /* exact, then the one-label wildcard, then "*" */
        CHECK_EQ_INT(conf_route_match(fe, "api.example.com"), 3);
        CHECK_EQ_INT(conf_route_match(fe, "a.shop.example.com"), 2);
        CHECK_EQ_INT(conf_route_match(fe, "shop.example.com"), 1);
        CHECK_EQ_INT(conf_route_match(fe, "a.b.shop.example.com"), 0);
        CHECK_EQ_INT(conf_route_match(fe, "example.com"), 0);
        CHECK_EQ_INT(conf_route_match(fe, "other"), 0);
        CHECK_EQ_INT(conf_route_match(fe, ""), -1);     /* no SNI: default_pool */
        /* a copy keeps them */
        d = conf_dup(c);
        CHECK(d != NULL);
        if (d != NULL) {
            CHECK_EQ_INT(d->frontends[0].routes.n, 4);
            CHECK_EQ_STR(d->frontends[0].routes.v[3].pool_name, "api");
            CHECK(d->frontends[0].routes.v[3].pattern != fe->routes.v[3].pattern);
            CHECK_EQ_STR(d->frontends[0].default_pool, "web");
        }
        conf_free(d);
    }
    conf_free(c);

    c = LOAD_OK(ROUTED "route = api.example.com api\n" POOLS);
    if (c != NULL) {
        fe = &c->frontends[0];
        CHECK(fe->default_pool == NULL);
        CHECK_EQ_INT(fe->route_unknown, CONF_ROUTE_UNKNOWN_DEFAULT);
        CHECK_EQ_INT(fe->sni_max_bytes, 16384);
        CHECK_EQ_INT(fe->sni_timeout_ms, 5000);
        CHECK_EQ_INT(conf_route_match(fe, "api.example.com"), 0);
        CHECK_EQ_INT(conf_route_match(fe, "x.api.example.com"), -1);
        CHECK_EQ_INT(conf_route_match(fe, "example.com"), -1);
    }
    conf_free(c);

    EXPECT_ERRORS(ROUTED "route = api.example.com api\nroute = *.shop.example.com shop\n"
                  "route = API.Example.Com. web\n" POOLS,
                  "@:5: frontend tls: route api.example.com is already routed at line 3 "
                  "(patterns compare without case and trailing dot)\n");
    EXPECT_ERRORS(ROUTED "pool = web\nroute = api.example.com api\n" POOLS,
                  "@:4: frontend tls: route lines and pool (line 3) exclude each other: a "
                  "frontend routes by name, or sends every client to its pool\n");
    EXPECT_ERRORS(ROUTED "route = api.example.com nope\ndefault_pool = gone\n" POOLS,
                  "@:3: frontend tls: pool \"nope\" does not exist\n"
                  "@:4: frontend tls: pool \"gone\" does not exist\n");
    EXPECT_ERRORS(ROUTED "route = api.example.com api\nroute_unknown = default\n" POOLS,
                  "@:4: frontend tls: route_unknown = default needs default_pool\n");
    EXPECT_ERRORS(ROUTED "pool = web\ndefault_pool = web\nsni_timeout = 1s\n" POOLS,
                  "@:4: frontend tls: default_pool applies to route lines, and the frontend "
                  "has none\n"
                  "@:5: frontend tls: sni_timeout applies to route lines, and the frontend "
                  "has none\n");
    EXPECT_ERRORS(ROUTED "route = a*.example.com api\nroute = *. api\nroute = foo..bar api\n"
                  "route = *.*.example.com api\nroute = -\nroute = api.example.com a b\n"
                  "route = api.example.com web!\nsni_max_bytes = 100\n" POOLS,
                  "@:3: route: \"a*.example.com\" is not a host name, \"*.NAME\" or \"*\" "
                  "(labels of 1 to 63 of A-Z a-z 0-9 - _, at most 253 bytes; a \"*\" only as "
                  "the whole first label)\n"
                  "@:4: route: \"*.\" is not a host name, \"*.NAME\" or \"*\" (labels of 1 to "
                  "63 of A-Z a-z 0-9 - _, at most 253 bytes; a \"*\" only as the whole first "
                  "label)\n"
                  "@:5: route: \"foo..bar\" is not a host name, \"*.NAME\" or \"*\" (labels of "
                  "1 to 63 of A-Z a-z 0-9 - _, at most 253 bytes; a \"*\" only as the whole "
                  "first label)\n"
                  "@:6: route: \"*.*.example.com\" is not a host name, \"*.NAME\" or \"*\" "
                  "(labels of 1 to 63 of A-Z a-z 0-9 - _, at most 253 bytes; a \"*\" only as "
                  "the whole first label)\n"
                  "@:7: route: \"-\" is not PATTERN POOL (a name, \"*.NAME\" or \"*\", then "
                  "the pool)\n"
                  "@:8: route: \"api.example.com a b\" is not PATTERN POOL (a name, "
                  "\"*.NAME\" or \"*\", then the pool)\n"
                  "@:9: route: pool \"web!\" is not a valid name (use 1 to 63 of A-Z a-z 0-9 "
                  "_ . -)\n"
                  "@:10: sni_max_bytes: 100 is out of range (256..65536)\n");
}

/* protocol = udp: its keys and defaults; a UDP and a TCP frontend may
 * share an address and port, two of one protocol may not; each protocol's
 * keys are refused under the other, at their lines. */
static void
test_udp(void)
{
    struct conf *c;
    const struct conf_frontend *fe;

    c = LOAD_OK("[frontend dns]\nlisten = 127.0.0.1:5353\nprotocol = udp\npool = web\n"
                "udp_responses = 1\nudp_idle_timeout = 2s\nudp_max_flows = 100\n"
                "log_flows = on\n"
                "[frontend dnstcp]\nlisten = 127.0.0.1:5353\npool = web\n" POOLS);
    if (c != NULL) {
        fe = &c->frontends[0];
        CHECK_EQ_INT(fe->protocol, CONF_PROTOCOL_UDP);
        CHECK_EQ_INT(fe->udp_responses, 1);
        CHECK_EQ_INT(fe->udp_idle_timeout_ms, 2000);
        CHECK_EQ_INT(fe->udp_max_flows, 100);
        CHECK(fe->log_flows);
        fe = &c->frontends[1];
        CHECK_EQ_INT(fe->protocol, CONF_PROTOCOL_TCP);
        CHECK_EQ_INT(fe->udp_responses, 0);
        CHECK_EQ_INT(fe->udp_idle_timeout_ms, 30000);
        CHECK_EQ_INT(fe->udp_max_flows, 65536);
        CHECK(!fe->log_flows);
        CHECK_EQ_STR(conf_protocol_name(CONF_PROTOCOL_UDP), "udp");
    }
    conf_free(c);

    EXPECT_ERRORS("[frontend a]\nlisten = 127.0.0.1:5353\nprotocol = udp\npool = web\n"
                  "[frontend b]\nlisten = 127.0.0.1:5353\nprotocol = udp\npool = web\n" POOLS,
                  "@:6: frontend b: listen 127.0.0.1:5353 is already used by frontend a at "
                  "line 2\n");
    EXPECT_ERRORS("[frontend a]\nlisten = 127.0.0.1:5353\nprotocol = sctp\npool = web\n" POOLS,
                  "@:3: protocol: \"sctp\" is not one of tcp or udp\n");
    EXPECT_ERRORS("[frontend a]\nlisten = 127.0.0.1:5353\nprotocol = udp\npool = web\n"
                  "accept_proxy = v2\naccept_proxy_from = 10.0.0.0/8\nrate_per_source = 5/s\n"
                  "[frontend b]\nlisten = 127.0.0.1:80\npool = web\nudp_responses = 1\n"
                  "log_flows = on\n" POOLS,
                  "@:5: frontend a: accept_proxy applies to protocol = tcp frontends, and this "
                  "one is udp\n"
                  "@:6: frontend a: accept_proxy_from applies to protocol = tcp frontends, and "
                  "this one is udp\n"
                  "@:7: frontend a: rate_per_source applies to protocol = tcp frontends, and "
                  "this one is udp\n"
                  "@:11: frontend b: udp_responses applies to protocol = udp frontends, and "
                  "this one is tcp\n"
                  "@:12: frontend b: log_flows applies to protocol = udp frontends, and this "
                  "one is tcp\n");
}

int
main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/conf_test.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/lb.ini", dir);

    test_example();
    test_defaults();
    test_workers_follow_affinity();
    test_all_keys();
    test_syntax_ok();
    test_long_lines();
    test_indentation();
    test_sections();
    test_keys();
    test_values();
    test_servers();
    test_send_proxy();
    test_frontend_access();
    test_routes();
    test_udp();
    test_unresolvable();
    test_references();
    test_check_timeout();
    test_agent_keys();
    test_control_socket();
    test_dup_then_add();
    test_man_page_lists_every_key();
    test_file();
    test_changed_while_read();
    test_load_quiet_waits();
    test_load_quiet_writer();
    test_many_errors();

    unlink(path);
    rmdir(dir);
    return CHECK_DONE();
}
