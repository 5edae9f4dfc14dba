"""magnetar.web"""
