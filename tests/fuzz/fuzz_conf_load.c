/*
 * fuzz_conf_load.c - the config loader (conf_load_text, which conf_load
 * runs on the file's bytes) on arbitrary bytes.
 *
 * Checks: no crash, leak or undefined behaviour; exactly one of a config or
 * an error list comes back; every error is one line of text that starts
 * with the file name; a config that loads holds what conf_check promises.
 */
#include <sys/socket.h>

#include "conf.h"
#include "conf_value.h"
#include "fuzz.h"

#define FUZZ_FILE "fuzz.ini"

static void
fuzz_check_addr(const struct conf_addr *a)
{
    FUZZ_CHECK(a->ss.ss_family == AF_INET || a->ss.ss_family == AF_INET6);
    FUZZ_CHECK(a->len > 0 && a->len <= sizeof(a->ss));
    FUZZ_CHECK(strnlen(a->text, sizeof(a->text)) < sizeof(a->text));
}

static void
fuzz_check_server_addr(const struct conf_server_addr *a)
{
    FUZZ_CHECK(a->sa.sa.sa_family == AF_INET || a->sa.sa.sa_family == AF_INET6);
    FUZZ_CHECK(a->len > 0 && a->len <= sizeof(a->sa));
    FUZZ_CHECK(a->text != NULL && strlen(a->text) < CONF_ADDR_TEXT_MAX);
}

static void
fuzz_check_conf(const struct conf *c)
{
    FUZZ_CHECK(strcmp(c->file, FUZZ_FILE) == 0);
    FUZZ_CHECK(c->global.workers >= 1);
    FUZZ_CHECK(c->admin.token != NULL);
    fuzz_check_addr(&c->admin.listen);
    for (size_t i = 0; i < c->nfrontends; i++) {
        const struct conf_frontend *f = &c->frontends[i];

        FUZZ_CHECK(conf_name_is_valid(f->name));
        fuzz_check_addr(&f->listen);
        FUZZ_CHECK(f->pool_index < c->npools);
        FUZZ_CHECK(strcmp(c->pools[f->pool_index].name, f->pool_name) == 0);
    }
    for (size_t i = 0; i < c->npools; i++) {
        const struct conf_pool *p = &c->pools[i];

        FUZZ_CHECK(conf_name_is_valid(p->name));
        FUZZ_CHECK(p->nservers >= 1);
        FUZZ_CHECK(p->check_path != NULL && p->check_path[0] == '/');
        FUZZ_CHECK(p->check_host != NULL && p->check_ca != NULL);
        FUZZ_CHECK(p->check_timeout_ms <= p->check_interval_ms);
        FUZZ_CHECK(p->check_expect.nranges >= 1 &&
                   p->check_expect.nranges <= CONF_EXPECT_MAX_RANGES);
        for (size_t r = 0; r < p->check_expect.nranges; r++) {
            FUZZ_CHECK(p->check_expect.ranges[r].lo >= CONF_STATUS_MIN);
            FUZZ_CHECK(p->check_expect.ranges[r].lo <=
                       p->check_expect.ranges[r].hi);
            FUZZ_CHECK(p->check_expect.ranges[r].hi <= CONF_STATUS_MAX);
        }
        FUZZ_CHECK(!p->min_servers.is_percent || p->min_servers.value <= 100);
        for (size_t s = 0; s < p->nservers; s++) {
            FUZZ_CHECK(conf_server_name_is_valid(p->servers[s].name));
            FUZZ_CHECK(p->servers[s].weight >= CONF_WEIGHT_MIN &&
                       p->servers[s].weight <= CONF_WEIGHT_MAX);
            FUZZ_CHECK(p->servers[s].line >= 1);
            fuzz_check_server_addr(&p->servers[s].addr);
            for (size_t t = 0; t < s; t++)
                FUZZ_CHECK(strcmp(p->servers[s].name, p->servers[t].name) != 0);
        }
        for (size_t t = 0; t < i; t++)
            FUZZ_CHECK(strcmp(p->name, c->pools[t].name) != 0);
    }
}

/* One "fuzz.ini:..." line per problem, each ending in '\n', and nothing in
 * them that would break a log line: the loader refuses control bytes
 * before it quotes any value. */
static void
fuzz_check_errors(const char *errors)
{
    const char *line = errors;
    size_t nlines = 0;

    FUZZ_CHECK(errors[0] != '\0');
    while (*line != '\0') {
        const char *nl = strchr(line, '\n');

        FUZZ_CHECK(nl != NULL);
        FUZZ_CHECK(strncmp(line, FUZZ_FILE ":", sizeof(FUZZ_FILE)) == 0);
        for (const char *q = line; q < nl; q++)
            FUZZ_CHECK((unsigned char)*q >= 0x20 || *q == '\t');
        nlines++;
        line = nl + 1;
    }
    /* at most 100 problems, and a line saying how many more there were */
    FUZZ_CHECK(nlines <= 101);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct conf *c = (struct conf *)1;
    char *errors = (char *)1;
    int rc;

    rc = conf_load_text(FUZZ_FILE, (const char *)data, size, &c, &errors);
    if (rc == 0) {
        FUZZ_CHECK(c != NULL && errors == NULL);
        fuzz_check_conf(c);
        conf_free(c);
    } else {
        FUZZ_CHECK(rc == -1 && c == NULL && errors != NULL);
        fuzz_check_errors(errors);
        free(errors);
    }
    return 0;
}
