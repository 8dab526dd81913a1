package planner

// The orders' own state, for the tests that check their internals: nil
// where the plan has another order.

func lanesOf(pl *Plan) *lanes {
	l, _ := pl.order.(*lanes)
	return l
}

func scheduleOf(pl *Plan) *schedule {
	sc, _ := pl.order.(*schedule)
	return sc
}

func laneEpochs(ep *EpochPlan) []*EpochPlan {
	if le, ok := ep.o.(*laneEpoch); ok {
		return le.lanes
	}
	return nil
}

func randomOf(ep *EpochPlan) *randomEpoch {
	re, _ := ep.o.(*randomEpoch)
	return re
}
