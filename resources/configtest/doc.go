// Package configtest tests engine/config with the registered resource
// kinds (resourcestest.Load): the configuration cases of testdata/config, the
// examples, sensitivity, functions, a fifth kind registered beside the
// real ones, the load benchmark and the configuration fuzzer. They live
// here, not in engine/config, because the engine never imports the
// resources, its tests included (engine/layering_test.go).
package configtest
