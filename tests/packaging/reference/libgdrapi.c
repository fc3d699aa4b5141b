/* Test fixture: stands in for the reference's libgdrapi.so.2.6 (only its
 * file names and soname matter to the upgrade tests). */
int gdr_fixture_reference_layout(void);
int gdr_fixture_reference_layout(void)
{
	return 0;
}
