/* The CUnit runner of the compiler's unit tests. Every tests/unit/test_X.c
 * defines test_X_register(), which adds its suite; the Makefile generates
 * the list (registry.h). Exits non-zero when any assertion failed. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

int
main(int argc, char **argv)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	for (int i = 0; i < (int)(sizeof registry / sizeof registry[0]); i++)
		registry[i]();
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (argc > 1) {
		CU_pSuite s = CU_get_suite(argv[1]);
		if (!s) {
			fprintf(stderr, "no suite named %s\n", argv[1]);
			return 2;
		}
		CU_basic_run_suite(s);
	} else {
		CU_basic_run_tests();
	}
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
