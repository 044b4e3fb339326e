package ratelog

// Keys is how many keys are in an interval now.
func (h *Handler) Keys() int {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return len(h.st.keys)
}
