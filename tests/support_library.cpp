// Anchors the sluice_test_support library, whose fixtures live in tests/support/.
namespace sluice::test {
int support_library_anchor = 0;
}  // namespace sluice::test
