/*
 * fuzz_conf_addr.c - addresses (conf_parse_addr, for listen and for
 * servers) and pool server lines (conf_parse_server), which carry one.
 *
 * Linked with no_dns.c: names never reach a resolver. Checks that an
 * accepted address is an IPv4 or IPv6 socket address whose port is the
 * one written, keeps its text as written, and overlaps itself; that a
 * bracketed host is IPv6; that a server line gives a valid name and a
 * weight in range; and that every refusal says why in one line.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "conf_value.h"
#include "fuzz.h"

static uint16_t
fuzz_port(const struct conf_addr *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

/* The port as written: the digits after the last ':'. */
static unsigned long
fuzz_written_port(const char *s)
{
    const char *colon = strrchr(s, ':');

    FUZZ_CHECK(colon != NULL);
    return strtoul(colon + 1, NULL, 10);
}

static void
fuzz_check_addr(const char *s, const struct conf_addr *a)
{
    FUZZ_CHECK(a->ss.ss_family == AF_INET || a->ss.ss_family == AF_INET6);
    FUZZ_CHECK(a->len == (a->ss.ss_family == AF_INET
                              ? sizeof(struct sockaddr_in)
                              : sizeof(struct sockaddr_in6)));
    FUZZ_CHECK(strcmp(a->text, s) == 0);
    FUZZ_CHECK(fuzz_port(a) >= 1 && fuzz_port(a) == fuzz_written_port(s));
    if (s[0] == '[')
        FUZZ_CHECK(a->ss.ss_family == AF_INET6);
    FUZZ_CHECK(conf_addr_overlaps(a, a));
}

static void
fuzz_addr(const char *s, bool is_listen)
{
    struct conf_addr a;
    char err[256];
    enum conf_addr_status st;

    st = conf_parse_addr(s, is_listen, &a, err, sizeof(err));
    FUZZ_CHECK(st == CONF_ADDR_OK || st == CONF_ADDR_BAD ||
               st == CONF_ADDR_NO_PORT || st == CONF_ADDR_UNRESOLVED);
    if (st != CONF_ADDR_OK) {
        fuzz_check_message(err, sizeof(err));
        return;
    }
    fuzz_check_addr(s, &a);
}

static void
fuzz_server(const char *s)
{
    char name[CONF_NAME_MAX + 1], err[512];
    struct conf_server srv;
    struct conf_addr a;

    if (conf_parse_server(s, name, &srv, err, sizeof(err)) != 0) {
        fuzz_check_message(err, sizeof(err));
        return;
    }
    FUZZ_CHECK(conf_server_name_is_valid(name));
    FUZZ_CHECK(strstr(s, name) != NULL);
    FUZZ_CHECK(srv.weight >= CONF_WEIGHT_MIN && srv.weight <= CONF_WEIGHT_MAX);
    FUZZ_CHECK(srv.max_connections <= CONF_SERVER_CONNS_MAX);
    /* an option given is in the text */
    FUZZ_CHECK(srv.max_connections == 0 || strstr(s, "max_connections=") != NULL);
    FUZZ_CHECK(srv.weight == 1 || strstr(s, "weight=") != NULL);
    FUZZ_CHECK(strstr(s, srv.addr.text) != NULL);
    /* the server's address at its size holds what a struct conf_addr would */
    FUZZ_CHECK(strlen(srv.addr.text) < sizeof(a.text) && srv.addr.len <= sizeof(srv.addr.sa));
    memset(&a, 0, sizeof(a));
    snprintf(a.text, sizeof(a.text), "%s", srv.addr.text);
    memcpy(&a.ss, &srv.addr.sa, srv.addr.len);
    a.len = srv.addr.len;
    fuzz_check_addr(srv.addr.text, &a);
    free(srv.addr.text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);

    fuzz_addr(s, true);
    fuzz_addr(s, false);
    fuzz_server(s);
    free(s);
    return 0;
}
