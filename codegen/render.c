/* render.c: DOT text to SVG or PNG through libgvc (the only file that
 * includes <gvc.h>), for the schedule and the dependency graph alike.
 * requires: DOT text. ensures: the picture's bytes in a malloc'd buffer
 * (compiler/main.c writes them as it writes every output), or an error
 * reported and no buffer.
 *
 * The plugins (dot layout, core renderers, cairo for PNG) are linked in
 * and handed to gvContextPlugins, so no `dot -c` configuration file is
 * needed at run time. When the build did not link them (the symbols are
 * weak), libgvc falls back to loading its installed plugins. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gvc.h>
#include <gvplugin.h>

#include "codegen.h"

extern gvplugin_library_t gvplugin_dot_layout_LTX_library __attribute__((weak));
extern gvplugin_library_t gvplugin_core_LTX_library __attribute__((weak));
extern gvplugin_library_t gvplugin_pango_LTX_library __attribute__((weak));

/* LeakSanitizer reads this: graphviz's dot layout (virtual edges) and the
 * pango/fontconfig font caches keep memory that gvFreeContext does not
 * return. Those leaks are theirs; sanitizer runs stay about ours. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_options(void);
const char *
__lsan_default_suppressions(void)
{
	return "leak:libgvplugin_dot_layout\nleak:libgvplugin_pango\nleak:libfontconfig\n"
	       "leak:libpango\nleak:libgvc\n";
}

const char *
__lsan_default_options(void)
{
	return "print_suppressions=0";
}

/* A line graphviz printed while cfc rendered: a note of cfc's (in the
 * diagnostics format asked for); past PNG's bitmap limit, one that says
 * what to do instead. */
static void
render_note(Diag *d, char *msg)
{
	size_t n = strlen(msg);
	const char *scale;

	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = 0;
	if (!n)
		return;
	if (strstr(msg, "too large for cairo-renderer bitmaps")) {
		scale = strstr(msg, "Scaling by ");
		diag_plain_note(d, "the picture is larger than a PNG can be here, so graphviz "
		                "scaled it down%s%s; --emit=svg draws it at full size",
		                scale ? " by " : "", scale ? scale + 11 : "");
		return;
	}
	diag_plain_note(d, "graphviz: %s", msg);
}

static GVC_t *
render_context(void)
{
	static lt_symlist_t builtins[4];
	int n = 0;

	if (!&gvplugin_dot_layout_LTX_library || !&gvplugin_core_LTX_library)
		return gvContext();
	builtins[n++] = (lt_symlist_t){"gvplugin_dot_layout_LTX_library", &gvplugin_dot_layout_LTX_library};
	builtins[n++] = (lt_symlist_t){"gvplugin_core_LTX_library", &gvplugin_core_LTX_library};
	if (&gvplugin_pango_LTX_library)
		builtins[n++] = (lt_symlist_t){"gvplugin_pango_LTX_library", &gvplugin_pango_LTX_library};
	builtins[n] = (lt_symlist_t){NULL, NULL};
	return gvContextPlugins(builtins, 0);
}

/* Graphviz prints its warnings and errors on stderr (agerr, and the
 * cairo plugin's own fprintf of the bitmap limit): while it runs, stderr
 * goes to a temporary file whose lines become notes. Returns the saved
 * descriptor of stderr, or -1 (then graphviz prints as it likes). */
static int
stderr_catch(FILE **tmp)
{
	int saved;

	fflush(stderr);
	if (!(*tmp = tmpfile()))
		return -1;
	if ((saved = dup(2)) < 0 || dup2(fileno(*tmp), 2) < 0) {
		if (saved >= 0)
			close(saved);
		fclose(*tmp);
		*tmp = NULL;
		return -1;
	}
	return saved;
}

static void
stderr_release(int saved, FILE *tmp, Diag *d)
{
	char line[1024];

	if (saved < 0)
		return;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	while (fgets(line, sizeof line, tmp))
		render_note(d, line);
	fclose(tmp);
}

/* What went wrong in render_dot, reported once graphviz's own messages
 * are out. */
enum { RF_OK, RF_READ, RF_LAYOUT, RF_RENDER };

int
render_dot(const char *dot_text, const char *format, char **out, size_t *outlen, Diag *d)
{
	char *data = NULL;
	unsigned len = 0;
	FILE *tmp = NULL;
	int fail = RF_OK;

	*out = NULL;
	*outlen = 0;
	if (strcmp(format, "svg") && strcmp(format, "png")) {
		diag_plain(d, "cannot render '%s': svg or png", format);
		return 1;
	}
	int saved = stderr_catch(&tmp);
	GVC_t *gvc = render_context();
	Agraph_t *g = agmemread(dot_text);
	if (!g) {
		fail = RF_READ;
	} else if (gvLayout(gvc, g, "dot")) {
		fail = RF_LAYOUT;
	} else {
		if (gvRenderData(gvc, g, format, &data, &len))
			fail = RF_RENDER;
		gvFreeLayout(gvc, g);
	}
	if (!fail && (*out = malloc(len ? len : 1))) {
		memcpy(*out, data, len);
		*outlen = len;
	}
	if (data)
		gvFreeRenderData(data);
	if (g)
		agclose(g);
	gvFreeContext(gvc);
	stderr_release(saved, tmp, d);
	if (fail == RF_READ)
		diag_plain(d, "graphviz cannot read the DOT text");
	else if (fail == RF_LAYOUT)
		diag_plain(d, "graphviz could not lay the graph out");
	else if (fail == RF_RENDER)
		diag_plain(d, "graphviz cannot render %s here (is its plugin installed?)", format);
	return fail || !*out;
}
