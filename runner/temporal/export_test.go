package temporal

// DecodeHistory lets the tests read recorded histories (testdata).
var DecodeHistory = decodeHistory
