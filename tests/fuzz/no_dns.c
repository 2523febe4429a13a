/*
 * no_dns.c - keeps a fuzz target off the network. Fuzzed host names would
 * otherwise reach the resolver: slow, not reproducible, and traffic to a
 * server that is not ours. Linked into the targets that reach
 * conf_parse_addr, this getaddrinfo resolves literals only
 * (AI_NUMERICHOST), so a name fails at once as EAI_NONAME, which is what an
 * unknown name gives; a literal goes through libc as usual. The
 * executable's definition takes precedence over libc's, and over ASan's
 * interceptor, which is a weak alias.
 */
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

typedef int (*getaddrinfo_fn)(const char *, const char *,
                              const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res);

int
getaddrinfo(const char *node, const char *service,
            const struct addrinfo *hints, struct addrinfo **res)
{
    static getaddrinfo_fn libc_getaddrinfo;
    struct addrinfo h;

    if (libc_getaddrinfo == NULL) {
        /* POSIX lets dlsym's void * be converted to a function pointer. */
        void *sym = dlsym(RTLD_NEXT, "getaddrinfo");

        if (sym == NULL)
            abort();
        memcpy(&libc_getaddrinfo, &sym, sizeof(sym));
    }
    if (hints != NULL)
        h = *hints;
    else
        memset(&h, 0, sizeof(h));
    h.ai_flags |= AI_NUMERICHOST;
    return libc_getaddrinfo(node, service, &h, res);
}
