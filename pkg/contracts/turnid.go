package contracts

// CodeTurnIDReused is the error code of a turn id sent again, in the same
// conversation, with another request: the first request's answer stands,
// and the new one is answered with this code instead of being dropped.
const CodeTurnIDReused = "turn_id_reused"
