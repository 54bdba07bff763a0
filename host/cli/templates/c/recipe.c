/*
 * {{name}}: a custom wazoo recipe. `wazoo run {{name}} PATH [--timeout-ms N]` waits until the
 * znode PATH exists and prints its data.
 *
 * Every wazoo:zk call blocks this guest while the host awaits ZooKeeper, so a recipe reads as
 * straight-line code. Change `exports_recipe_run` (or the world: WORLD in build.sh, which
 * writes the bindings again; wit/ is the contract to read, the bindings come from the wazoo
 * binary's own copy) to build your own. wazoo_guest.h is the layer over the bindings in
 * bindings/: error codes, the protected create, the predecessor wait, deadlines.
 *
 * Ownership: the export owns `args`; the strings it puts in `ret` or `err` go to the host,
 * which frees them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wazoo_guest.h"

/* Puts a printf-style message into the export's string `out` and returns false. */
static bool fail(recipe_string_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(recipe_string_t *out, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    size_t n = (size_t)vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = malloc(n + 1);
    vsnprintf(text, n + 1, fmt, again);
    va_end(again);
    recipe_string_dup_n(out, text, n);
    free(text);
    return false;
}

/* `s` in double quotes, with `"` and `\` escaped (malloc'd). */
static char *quoted(const char *s) {
    char *q = malloc(strlen(s) * 2 + 3), *o = q;
    *o++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            *o++ = '\\';
        *o++ = *s;
    }
    *o++ = '"';
    *o = '\0';
    return q;
}

/* A whole decimal number of milliseconds. */
static bool parse_ms(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (*s == '+')
        s++;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* `PATH [--timeout-ms N]`: *path points into `args`; NULL *timeout_ms waits without limit. On
 * a bad argument, *why (malloc'd) says what is wrong. */
static bool parse(const wz_names *args, const char **path, uint64_t **timeout_ms, uint64_t *ms,
                  char **why) {
    *path = NULL;
    *timeout_ms = NULL;
    for (size_t i = 0; i < args->count; i++) {
        const char *arg = args->names[i];
        if (strcmp(arg, "--timeout-ms") == 0) {
            if (++i == args->count) {
                *why = wz_strdup("--timeout-ms needs a number");
                return false;
            }
            if (!parse_ms(args->names[i], ms)) {
                char *q = quoted(args->names[i]);
                *why = wz_format("--timeout-ms: not a number: %s", q);
                free(q);
                return false;
            }
            *timeout_ms = ms;
        } else if (!*path) {
            *path = arg;
        } else {
            char *q = quoted(arg);
            *why = wz_format("unexpected argument %s", q);
            free(q);
            return false;
        }
    }
    if (!*path) {
        *why = wz_strdup("usage: {{name}} PATH [--timeout-ms N]");
        return false;
    }
    return true;
}

/* The error text for `code` at `path`. */
static bool describe(recipe_string_t *err, const char *path, int code) {
    if (code == WZ_TIMEOUT)
        return fail(err, "%s: still absent when the timeout passed", path);
    if (code == WZ_INVALID_PATH)
        return fail(err, "%s: invalid path: %s", path, wz_message());
    if (*wz_message())
        return fail(err, "%s: %s: %s", path, wz_error_name(code), wz_message());
    return fail(err, "%s: %s", path, wz_error_name(code));
}

static bool run(const wz_names *args, recipe_string_t *ret, recipe_string_t *err) {
    const char *path;
    uint64_t *timeout_ms, ms;
    char *why = NULL;
    if (!parse(args, &path, &timeout_ms, &ms, &why)) {
        recipe_string_dup(err, why);
        free(why);
        return false;
    }
    int rc = wz_check_path(path);
    if (rc != WZ_OK)
        return describe(err, path, rc);
    wz_deadline deadline = wz_deadline_after(timeout_ms);
    for (;;) {
        /* Read and arm a watch in one call: a creation between the two cannot be missed. */
        rc = wz_exists_watch_wait(path, true, deadline);
        if (rc != WZ_OK)
            return describe(err, path, rc);
        uint8_t *data;
        size_t len;
        rc = wz_get_data(path, &data, &len, NULL);
        /* Deleted again in between: wait for the next creation. */
        if (rc == WZ_NO_NODE)
            continue;
        if (rc != WZ_OK)
            return describe(err, path, rc);
        size_t text_len;
        char *text = wz_utf8_lossy(data, len, &text_len);
        wz_free(data);
        recipe_string_dup_n(ret, text, text_len);
        wz_free(text);
        return true;
    }
}

bool exports_recipe_run(recipe_list_string_t *args, recipe_string_t *ret, recipe_string_t *err) {
    wz_names argv;
    if (wz_take_strings(args, &argv) != WZ_OK)
        return fail(err, "%s", wz_message());
    bool ok = run(&argv, ret, err);
    wz_names_free(&argv);
    return ok;
}
